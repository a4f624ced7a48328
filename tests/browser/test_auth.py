"""Sign-in in the browser: with ``--auth-token`` the page asks for the token once, keeps it
for the tab, and streams through the cookie the sign-in set (EventSource sends no header)."""

from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page

TOKEN = "browser-s3cret"


def test_the_page_asks_for_the_token_once_and_streams_with_its_cookie(
    make_console: Callable[..., ConsoleServer], page: "Page"
) -> None:
    console = make_console("--auth-token", TOKEN)
    page.goto(console.ui(agent="assistant", instance="me", session="auth", panel="chat"))
    dialog = page.get_by_role("dialog", name="Sign in")
    expect(dialog).to_be_visible()
    token = dialog.get_by_label("Token")
    token.fill("wrong")
    dialog.get_by_role("button", name="Sign in").click()
    expect(dialog.get_by_role("alert")).to_contain_text("not the server's token")
    screenshot(page, "sign-in")
    token.fill(TOKEN)
    dialog.get_by_role("button", name="Sign in").click()
    expect(dialog).to_be_hidden()
    page.wait_for_selector("body[data-ready]", state="attached")
    cookie = next(c for c in page.context.cookies() if c["name"] == "tether_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # no script can read it

    message = page.get_by_role("textbox", name="Message")
    message.fill("hello with a token")
    message.press("Enter")
    expect(page.locator(".msg.agent")).to_have_text(["You said: hello with a token"])

    # Kept for the tab: a reload asks nothing.
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(dialog).to_be_hidden()
    expect(page.locator(".msg.agent")).to_have_text(["You said: hello with a token"])

    # Signed out: the cookie and the token are gone, and the page asks again; the cookie is
    # revoked too, so a copy of it opens nothing.
    page.get_by_role("button", name="Sign out").click()
    expect(dialog).to_be_visible()
    assert not [c for c in page.context.cookies() if c["name"] == "tether_console"]
    assert page.evaluate("sessionStorage.length") == 0
    copy = httpx.get(f"{console.url}/sessions", cookies={"tether_console": cookie["value"]})
    assert copy.status_code == 401
    ready_again = console.ui(agent="assistant", instance="me", session="auth")
    page.goto(ready_again)
    expect(dialog).to_be_visible()


def test_without_a_token_nothing_is_asked(console: ConsoleServer, page: "Page") -> None:
    ready(page, console.ui())
    expect(page.get_by_role("dialog", name="Sign in")).to_be_hidden()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
