"""The console works under every name its server answers to (issue 36, item 5): the loopback
names and the address it binds. Its POSTs say JSON (a bodiless one too) and come from its
own origin, so the server's checks of hosts, origins and content types let them all through,
with a token and without."""

from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from .conftest import ConsoleServer

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page

TOKEN = "hosts-s3cret"


@pytest.mark.parametrize(
    ("bind", "names", "args"),
    [
        ("127.0.0.1", ["127.0.0.1", "localhost"], ()),
        ("127.0.0.1", ["localhost"], ("--auth-token", TOKEN)),
        ("127.0.0.2", ["127.0.0.2"], ()),  # a bound address that is no loopback name
    ],
    ids=["loopback-names", "localhost-signed-in", "bound-address"],
)
def test_the_console_chats_and_aborts_under_each_name_of_its_server(
    make_console: Callable[..., ConsoleServer],
    page: "Page",
    bind: str,
    names: list[str],
    args: tuple[str, ...],
) -> None:
    console = make_console(*args, host=bind)
    for name in names:
        session = name.replace(".", "-")
        page.goto(f"http://{name}:{console.port}/ui?agent=assistant&instance=me&session={session}")
        if args:
            dialog = page.get_by_role("dialog", name="Sign in")
            dialog.get_by_label("Token").fill(TOKEN)
            dialog.get_by_role("button", name="Sign in").click()
            expect(dialog).to_be_hidden()
        page.wait_for_selector("body[data-ready]", state="attached")
        message = page.get_by_role("textbox", name="Message")
        message.fill(f"hello via {name}")
        message.press("Enter")
        transcript = page.get_by_role("log", name="Transcript")
        expect(transcript.locator(".msg.agent")).to_have_text([f"You said: hello via {name}"])

        message.fill("research tides")
        page.get_by_role("button", name="Send").click()
        expect(transcript.locator(".tool .progress")).to_contain_text("researching tides")
        page.get_by_role("button", name="Abort").click()  # a POST the server must take
        expect(transcript).to_contain_text("aborted")
    if args:
        page.get_by_role("button", name="Sign out").click()  # a POST without a body
        expect(page.get_by_role("dialog", name="Sign in")).to_be_visible()
