"""The Usage panel (issue 41): a tenant's spend against its budget for the day or the month,
from ``GET /usage?tenant=...&period=...``; a server without that route, or refusing it, hides
the panel.

STUB: ``GET /usage`` is being built beside this panel. Until it is merged the browser is
answered by ``_stub_usage`` below (Playwright's ``page.route``), in the response shape agreed
for it; once the route is served, drop the stub and dispatch against the real budget.
"""

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route


def _answer(tenant: str, period: str) -> dict[str, Any]:
    spent = {"modelCalls": 3, "tokens": 1200, "costUsd": 0.01, "toolCalls": 2}
    if period == "day":
        budget = {"modelCalls": 100, "tokens": None, "costUsd": 5.0, "toolCalls": None}
        remaining = {"modelCalls": 97, "tokens": None, "costUsd": 4.99, "toolCalls": None}
    else:
        budget = {"modelCalls": 3, "tokens": None, "costUsd": None, "toolCalls": None}
        remaining = {"modelCalls": 0, "tokens": None, "costUsd": None, "toolCalls": None}
    return {
        "tenant": tenant,
        "period": period,
        "start": "2026-12-07T00:00:00+00:00",
        "end": "2026-12-08T00:00:00+00:00",
        "spent": spent,
        "budget": budget,
        "remaining": remaining,
    }


def _stub_usage(page: "Page", asked: list[dict[str, list[str]]]) -> None:
    """STUB of ``GET /usage`` (see the module's docstring): answers what it was asked."""

    def answer(route: "Route") -> None:
        query = parse_qs(urlparse(route.request.url).query)
        asked.append(query)
        body = _answer(query.get("tenant", ["acme"])[0], query.get("period", ["day"])[0])
        route.fulfill(status=200, content_type="application/json", body=json.dumps(body))

    page.route(lambda url: urlparse(url).path == "/usage", answer)


def test_spend_against_budget_for_the_day_and_the_month(
    console: ConsoleServer, page: "Page"
) -> None:
    asked: list[dict[str, list[str]]] = []
    _stub_usage(page, asked)
    ready(page, console.ui(agent="assistant", instance="me"))
    page.get_by_role("navigation", name="Panels").get_by_role("link", name="Usage").click()
    panel = page.locator("#panel-usage")
    panel.get_by_label("Tenant").fill("acme")
    panel.get_by_label("Tenant").press("Enter")
    panel.get_by_label("Tenant").blur()
    calls = panel.locator("tr[data-limit=modelCalls]")
    expect(panel.locator(".window")).to_contain_text("Tenant acme · day")
    expect(calls.locator(".spent")).to_have_text("3")
    expect(calls.locator(".budget")).to_have_text("100")
    expect(calls.locator(".remaining")).to_have_text("97")
    expect(panel.locator("tr[data-limit=tokens] .budget")).to_have_text("no limit")
    expect(panel.locator("tr[data-limit=costUsd] .spent")).to_have_text("$0.0100")
    expect(panel.locator("tr[data-limit=costUsd] .budget")).to_have_text("$5.0000")
    screenshot(page, "usage-day")
    panel.get_by_label("Period").select_option("month")
    expect(panel.locator(".window")).to_contain_text("Tenant acme · month")
    expect(calls).to_have_class("exhausted")
    expect(calls.locator(".remaining")).to_have_text("0")
    assert {"tenant": ["acme"], "period": ["month"]} in asked


def test_without_the_route_the_usage_panel_is_hidden(console: ConsoleServer, page: "Page") -> None:
    ready(page, console.ui(agent="assistant", instance="me", panel="usage"))
    panels = page.get_by_role("navigation", name="Panels")
    expect(panels.get_by_role("link", name="Inspector")).to_be_visible()
    expect(panels.get_by_role("link", name="Usage")).to_have_count(0)
    expect(page.locator("#panel-usage")).to_be_hidden()
    expect(page.locator("#panel-chat")).to_be_visible()


def test_an_identity_the_route_refuses_gets_no_usage_panel(
    console: ConsoleServer, page: "Page"
) -> None:
    refusal = {"error": {"type": "forbidden", "message": "no", "details": {"scope": "x"}}}
    page.route(  # STUB of GET /usage refusing, as above
        lambda url: urlparse(url).path == "/usage",
        lambda route: route.fulfill(status=403, json=refusal),
    )
    ready(page, console.ui(agent="assistant", instance="me"))
    panels = page.get_by_role("navigation", name="Panels")
    expect(panels.get_by_role("link", name="Inspector")).to_be_visible()
    expect(panels.get_by_role("link", name="Usage")).to_have_count(0)
