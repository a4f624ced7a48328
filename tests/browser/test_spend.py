"""The session's spend, above its transcript (issue 41): what the session spent against its
session budget and, while a run with a budget of its own is open, that run's against its
own, read from the real ``GET /usage?session=`` of a server whose ``budgeted`` agent has a
session budget (``tests/browser/agents.py``)."""

from typing import TYPE_CHECKING
from urllib.parse import urlparse

import httpx
import pytest

from .agents import SESSION_BUDGET
from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page


def test_a_session_shows_its_spend_against_its_budgets(
    console: ConsoleServer, page: "Page"
) -> None:
    said = httpx.post(
        f"{console.url}/agents/budgeted/me?wait=true",
        json={"body": "spend a call", "session": "spend"},
        timeout=60,
    )
    assert said.status_code == 200, said.text
    # A second message whose own budget allows no call: it parks on its budget gate.
    parked = httpx.post(
        f"{console.url}/agents/budgeted/me",
        json={
            "body": "and another",
            "session": "spend",
            "budget": {"modelCalls": 0, "onExhausted": "park"},
        },
        timeout=30,
    )
    assert parked.status_code == 202, parked.text
    submission = parked.json()["submissionId"]
    conversation = parked.json()["conversationId"]

    ready(page, console.ui(agent="budgeted", instance="me", session="spend"))
    panel = page.locator("#spend")
    expect(panel).to_be_visible()
    summary = panel.locator("#spend-summary")
    expect(summary).to_contain_text("session 1 of 5 model calls, ")
    expect(summary).to_contain_text("· this run 0 of 0 model calls")
    expect(summary).to_have_class("exhausted")
    panel.get_by_role("heading", name="Spend").click()  # opens the tables
    session = panel.locator(".spend-session")
    calls = session.locator("tr[data-limit=modelCalls]")
    expect(calls.locator(".spent")).to_have_text("1")
    limit = SESSION_BUDGET.model_calls
    assert limit is not None
    expect(calls.locator(".budget")).to_have_text(str(limit))
    expect(calls.locator(".remaining")).to_have_text(str(limit - 1))
    expect(session.locator("tr[data-limit=costUsd] .budget")).to_have_text("no limit")
    run = panel.locator(f".spend-run[data-submission='{submission}']")
    expect(run.locator("tr[data-limit=modelCalls]")).to_have_class("exhausted")
    expect(run.locator("tr[data-limit=modelCalls] .budget")).to_have_text("0")
    listed = page.get_by_role("link", name="me / spend").locator(".pill")
    expect(listed).to_have_text("waiting: budget")
    screenshot(page, "spend")
    answer = httpx.get(f"{console.url}/usage", params={"session": conversation}, timeout=30)
    tokens = answer.json()["spent"]["tokens"]
    expect(session.locator("tr[data-limit=tokens] .spent")).to_have_text(f"{tokens:,}")

    aborted = httpx.post(f"{console.url}/submissions/{submission}/abort", json={}, timeout=30)
    assert aborted.status_code in (200, 202), aborted.text
    expect(run).to_have_count(0)  # nothing open: the session's spend alone
    expect(summary).not_to_contain_text("this run")


def test_a_server_without_the_session_form_shows_no_spend(
    console: ConsoleServer, page: "Page"
) -> None:
    # An older server answers its tenant form, the session parameter unknown to it.
    older = {
        "tenant": "acme",
        "period": "day",
        "start": "2026-12-07T00:00:00Z",
        "end": "2026-12-08T00:00:00Z",
        "spent": {"modelCalls": 3, "tokens": 1200, "costUsd": 0.01, "toolCalls": 2},
        "budget": None,
        "remaining": None,
    }
    page.route(
        lambda url: urlparse(url).path == "/usage",
        lambda route: route.fulfill(json=older),
    )
    said = httpx.post(
        f"{console.url}/agents/budgeted/me?wait=true",
        json={"body": "spend a call", "session": "older"},
        timeout=60,
    )
    assert said.status_code == 200, said.text
    ready(page, console.ui(agent="budgeted", instance="me", session="older"))
    expect(page.locator(".msg.agent")).to_have_count(1)
    expect(page.locator("#spend")).to_be_hidden()
