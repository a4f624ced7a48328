"""The inspector in the browser: the raw records, paged; Verify; Fork here; the spans
timeline; usage and cost; the subagent tree with links to the children."""

import re
from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page


def _say(console: ConsoleServer, body: str, session: str) -> None:
    answer = httpx.post(
        f"{console.url}/agents/assistant/me",
        params={"wait": True},
        json={"body": body, "session": session},
        timeout=60,
    )
    assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.text


def test_records_verify_fork_spans_usage_and_subagents(
    console: ConsoleServer, page: "Page"
) -> None:
    for turn in range(12):  # past one page of records
        _say(console, f"hello {turn}", "long")
    _say(console, "ask the researcher about tides", "long")
    ready(page, console.ui(agent="assistant", instance="me", session="long", panel="inspector"))
    records = page.locator("#records-body > tr")
    pager = page.locator("#records-page")
    expect(pager).to_contain_text(re.compile(r"records \d+ to \d+ of \d+"))
    head = int(pager.inner_text().rsplit(" ", 1)[1])
    assert head > 100
    expect(records).to_have_count(100)  # the newest page first
    expect(records.last.locator(".kind")).to_have_text("submission_settled")
    page.get_by_role("button", name="First").click()
    expect(pager).to_have_text(f"records 1 to 100 of {head}")
    expect(records.first.locator(".kind")).to_have_text("conversation_created")

    page.get_by_role("button", name="Verify").click()
    expect(page.locator("#verify-result")).to_have_text(
        f"Verified: the hash chain of {head} records holds."
    )

    # The spans timeline, and the subagent tree of the delegation.
    spans = page.get_by_role("list", name="Spans")
    expect(spans.locator("li").filter(has_text="research")).not_to_have_count(0)
    expect(spans.locator("li").filter(has_text="task").first).to_contain_text("→ researcher")
    tree = page.locator("#tree")
    expect(tree).to_contain_text("researcher / task-")
    expect(page.locator("#usage")).to_contain_text("Model calls")
    expect(page.locator("#usage")).to_contain_text("$0.000000")  # the echo model is free
    screenshot(page, "inspector")

    # Fork at record 3: a new session holding the first message, opened in the chat.
    page.get_by_role("button", name="Record 3", exact=True).click()
    expect(page.locator("tr.detail")).to_contain_text('"body": "hello 0"')
    page.get_by_role("button", name="Fork here").click()
    expect(page).to_have_url(re.compile(r"session=fork-.*panel=chat"))
    transcript = page.get_by_role("log", name="Transcript")
    expect(transcript.locator(".msg.user")).to_have_text(["hello 0"])

    # The tree's link opens the child's own session.
    page.goto(console.ui(agent="assistant", instance="me", session="long", panel="inspector"))
    page.locator("#tree").get_by_role("link", name="researcher / task-").click()
    expect(page).to_have_url(re.compile(r"agent=researcher"))
    expect(transcript.locator(".msg.user")).to_have_text(["research tides"])
    expect(transcript.locator(".msg.agent")).to_contain_text("Here is what I found")
