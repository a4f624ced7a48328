"""The console's session search (issue 43, item 5): the search box finds the sessions by the
words of their messages, the metadata filter by their metadata (``GET /sessions?q=`` and
``?metadata.<key>=``), each session shows its metadata, and Clear lists every session again."""

from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page


def test_the_sessions_list_is_searched_by_words_and_metadata(
    console: ConsoleServer, page: "Page"
) -> None:
    said = {
        "refunds": ("Where is my refund?", {"customer": "acme"}),
        "parcels": ("Where is my parcel?", {"customer": "globex"}),
        "greeting": ("hello", {"customer": "acme", "tier": 2}),
    }
    for session, (body, metadata) in said.items():
        sent = httpx.post(
            f"{console.url}/agents/assistant/me",
            params={"wait": True},
            json={"body": body, "session": session, "metadata": metadata},
            timeout=60,
        )
        assert sent.status_code == 200, sent.text
    ready(page, console.ui())
    links = page.locator("#session-list .session-link")
    expect(links).to_have_count(3)
    expect(page.get_by_role("link", name="me / greeting")).to_contain_text("customer=acme tier=2")
    page.get_by_label("Search messages").fill("refund")
    page.get_by_role("button", name="Search").click()
    expect(links).to_have_count(1)
    expect(links.first).to_contain_text("me / refunds")
    page.get_by_label("Search messages").fill("where is")
    page.get_by_label("Metadata filter (key=value, space separated)").fill("customer=globex")
    page.get_by_role("button", name="Search").click()
    expect(links).to_have_count(1)
    expect(links.first).to_contain_text("me / parcels")
    screenshot(page, "sessions-search")
    page.get_by_label("Search messages").fill("nothing like it")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#session-list")).to_contain_text("no session matches")
    page.get_by_role("button", name="Clear").click()
    expect(links).to_have_count(3)
