"""The session's runs not settled, above the transcript (issue 41): a delayed dispatch shows
``scheduled`` with its due time and its priority, and Cancel aborts it unrun; a run held back
by a limit of runs in flight shows ``limit``, its own pill, until the run ahead of it ends,
and so does its session in the sessions list."""

from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from collections.abc import Callable

    from playwright.sync_api import Page


def test_a_scheduled_run_shows_its_due_time_and_is_cancelled_unrun(
    console: ConsoleServer, page: "Page"
) -> None:
    later = {"body": "see you later", "session": "later", "afterSeconds": 3600, "priority": 3}
    sent = httpx.post(f"{console.url}/agents/assistant/me", json=later, timeout=30)
    assert sent.status_code == 202, sent.text
    submission = sent.json()["submissionId"]
    ready(page, console.ui(agent="assistant", instance="me", session="later"))
    run = page.locator("#runs .run")
    expect(run).to_have_count(1)
    expect(run.locator(".pill")).to_have_text("scheduled")
    expect(run.locator(".due")).to_contain_text("due in")
    due = httpx.get(f"{console.url}/submissions/{submission}", timeout=30).json()["dueAt"]
    expect(run.locator(".due")).to_have_attribute("datetime", due)
    expect(run.locator(".priority")).to_have_text("priority 3")
    screenshot(page, "runs-scheduled")
    run.get_by_role("button", name="Cancel").click()
    expect(page.locator("#runs")).to_be_hidden()  # nothing left unsettled
    settled = httpx.get(
        f"{console.url}/submissions/{submission}", params={"wait": True}, timeout=90
    ).json()
    assert settled["settlement"]["status"] == "aborted", settled
    expect(page.locator(".msg.agent")).to_have_count(0)  # it never ran


def test_a_run_held_back_by_a_limit_says_so(
    make_console: "Callable[..., ConsoleServer]", page: "Page", tmp_path: Path
) -> None:
    gate = tmp_path / "gate"  # the run ahead stops half-way through its answer until then
    console = make_console(TETHER_TEST_GATE=str(gate))
    ids = []
    for session in ("ahead", "behind"):
        body = {"body": "hello there, limited", "session": session}
        sent = httpx.post(f"{console.url}/agents/limited/me", json=body, timeout=30)
        assert sent.status_code == 202, sent.text
        ids.append(sent.json()["submissionId"])
    ready(page, console.ui(agent="limited", instance="me", session="behind"))
    pill = page.locator("#runs .run .pill")
    expect(pill).to_have_text("limit")
    expect(pill).to_have_class("pill limit")
    held = "Held back: its agent's runs in flight are at their limit"
    expect(pill).to_have_attribute("title", held)
    expect(page.locator("#runs .run .held-by")).to_have_text("agent's limit")
    expect(page.locator("#runs .run .priority")).to_have_text("priority 0")
    screenshot(page, "runs-limit")
    # The sessions list says so too: waiting for the limit, not running.
    listed = page.get_by_role("link", name="me / behind").locator(".pill")
    expect(listed).to_have_text("limit")
    expect(listed).to_have_attribute("title", held)
    expect(page.get_by_role("link", name="me / ahead").locator(".pill")).to_have_text("running")
    page.get_by_role("link", name="me / ahead").click()
    expect(page.locator("#runs .run .pill")).to_have_text("running")
    gate.touch()
    for submission in ids:
        settled = httpx.get(
            f"{console.url}/submissions/{submission}", params={"wait": True}, timeout=90
        ).json()
        assert settled["settlement"]["status"] == "succeeded", settled
    expect(page.locator("#runs")).to_be_hidden()
