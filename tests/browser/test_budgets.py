"""The console's budget gates, beside the approvals: a run parked on its budget is listed
with what it spent against which limit, counted on the badge, extended by the amounts typed
(a JSON object) and resumed."""

from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from collections.abc import Callable

    from playwright.sync_api import Page


def test_extend_a_budget_from_the_console(
    make_console: "Callable[..., ConsoleServer]", page: "Page"
) -> None:
    console = make_console()
    ready(page, console.ui(agent="assistant", instance="me", panel="approvals"))
    badge = page.locator("#approvals-badge")
    expect(page.locator("#budgets")).to_contain_text("No run waits for more budget.")
    broke = {"body": "hi", "budget": {"modelCalls": 0, "onExhausted": "park"}}
    sent = httpx.post(f"{console.url}/agents/assistant/me", json=broke, timeout=30)
    assert sent.status_code == 202, sent.text
    expect(badge).to_have_text("1")  # live: nobody reloaded
    card = page.locator("#budgets .gate")
    expect(card).to_have_count(1)
    expect(card.locator(".limit")).to_have_text("modelCalls: 0 of 0 used (its budget)")
    extension = card.get_by_role("textbox", name="Extension (JSON)")
    extension.fill("{not json")
    expect(card.get_by_role("button", name="Extend")).to_be_disabled()
    extension.fill('{"modelCalls": 5}')
    screenshot(page, "budgets")
    card.get_by_role("button", name="Extend").click()
    expect(page.locator("#budgets")).to_contain_text("No run waits for more budget.")
    expect(badge).to_be_hidden()
    submission = sent.json()["submissionId"]
    settled = httpx.get(
        f"{console.url}/submissions/{submission}", params={"wait": True}, timeout=90
    ).json()
    assert settled["settlement"]["status"] == "succeeded", settled
    decided = httpx.get(f"{console.url}/budgets", params={"status": "decided"}, timeout=30)
    [item] = decided.json()["budgets"]
    assert item["extension"] == {"modelCalls": 5} and item["approver"] == "console"
