"""The Usage panel (issue 41): a tenant's spend against its budget for the day or the month,
from ``GET /usage?tenant=...&period=...``. Signed in as a tenant's identity the panel shows
that tenant, read from the real route of a server whose application gives tenant ``acme`` a
budget for the day (``tests/browser/agents.py``); a server that has no such route (an older
one) or that refuses it hides the panel."""

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import httpx
import pytest

from .agents import ACME_DAY
from .conftest import ConsoleServer, Served, ready, screenshot, sign_in

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page


def _count(value: int) -> str:
    return f"{value:,}"


def test_a_tenant_sees_its_spend_against_its_budget(served: Served, page: "Page") -> None:
    console = served.console
    writer = {"Authorization": f"Bearer {served.writer.token}"}
    said = httpx.post(
        f"{console.url}/agents/slow/me?wait=true",
        json={"body": "spend a call", "session": "usage"},
        headers=writer,
        timeout=60,
    )
    assert said.status_code == 200, said.text
    usage = httpx.get(f"{console.url}/usage", params={"period": "day"}, headers=writer).json()
    spent = usage["spent"]["modelCalls"]
    assert spent >= 1
    assert usage["budget"]["modelCalls"] == ACME_DAY.model_calls

    sign_in(page, console.ui(agent="slow", instance="me", session="usage"), served.reader.token)
    page.get_by_role("navigation", name="Panels").get_by_role("link", name="Usage").click()
    panel = page.locator("#panel-usage")
    expect(panel.get_by_label("Tenant")).to_have_value("acme")
    expect(panel.locator(".window")).to_contain_text("Tenant acme · day")
    calls = panel.locator("tr[data-limit=modelCalls]")
    expect(calls.locator(".spent")).to_have_text(_count(spent))
    expect(calls.locator(".budget")).to_have_text(_count(1000))
    expect(calls.locator(".remaining")).to_have_text(_count(1000 - spent))
    expect(panel.locator("tr[data-limit=tokens] .budget")).to_have_text("no limit")
    expect(panel.locator("tr[data-limit=costUsd] .budget")).to_have_text("$5.0000")
    screenshot(page, "usage-day")
    panel.get_by_label("Period").select_option("month")
    expect(panel.locator(".window")).to_contain_text("Tenant acme · month")
    expect(calls.locator(".budget")).to_have_text("no limit")


def _used_up(tenant: str) -> dict[str, Any]:
    """An answer of ``GET /usage`` for a month whose model calls are used up."""
    return {
        "tenant": tenant,
        "period": "month",
        "start": "2026-12-01T00:00:00+00:00",
        "end": "2027-01-01T00:00:00+00:00",
        "spent": {"modelCalls": 3, "tokens": 1200, "costUsd": 0.01, "toolCalls": 2},
        "budget": {"modelCalls": 3, "tokens": None, "costUsd": None, "toolCalls": None},
        "remaining": {"modelCalls": 0, "tokens": None, "costUsd": None, "toolCalls": None},
    }


def test_an_operator_names_the_tenant_and_a_used_up_limit_is_marked(
    console: ConsoleServer, page: "Page"
) -> None:
    # The real route answers an operator who names no tenant 422 (the panel stays, waiting
    # for a name); the answer for the tenant named is given here, to show a used-up limit.
    page.route(
        lambda url: urlparse(url).path == "/usage" and "tenant=" in url,
        lambda route: route.fulfill(json=_used_up("globex")),
    )
    ready(page, console.ui(agent="assistant", instance="me"))
    page.get_by_role("navigation", name="Panels").get_by_role("link", name="Usage").click()
    panel = page.locator("#panel-usage")
    panel.get_by_label("Tenant").fill("globex")
    panel.get_by_label("Tenant").press("Enter")
    panel.get_by_label("Tenant").blur()
    calls = panel.locator("tr[data-limit=modelCalls]")
    expect(calls).to_have_class("exhausted")
    expect(calls.locator(".remaining")).to_have_text("0")
    expect(panel.locator("tr[data-limit=costUsd] .spent")).to_have_text("$0.0100")


@pytest.mark.parametrize("status", [404, 403])
def test_a_server_without_the_route_or_refusing_it_shows_no_usage_panel(
    console: ConsoleServer, page: "Page", status: int
) -> None:
    # 404: a server older than the route; 403: one whose identity may not read it.
    refusal = {"error": {"type": "refused", "message": "no", "details": {}}}
    page.route(
        lambda url: urlparse(url).path == "/usage",
        lambda route: route.fulfill(status=status, json=refusal),
    )
    ready(page, console.ui(agent="assistant", instance="me", panel="usage"))
    panels = page.get_by_role("navigation", name="Panels")
    expect(panels.get_by_role("link", name="Inspector")).to_be_visible()
    expect(panels.get_by_role("link", name="Usage")).to_have_count(0)
    expect(page.locator("#panel-usage")).to_be_hidden()
    expect(page.locator("#panel-chat")).to_be_visible()
