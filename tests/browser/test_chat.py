"""Chat in the browser: a message and its streamed answer, a steer that joins a running
research, the session in the URL (a reload comes back to it), and a phone-sized screen."""

import re
from typing import TYPE_CHECKING

import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page


def test_a_message_streams_its_answer_and_a_steer_joins_the_research(
    console: ConsoleServer, page: "Page"
) -> None:
    ready(page, console.ui(agent="assistant", instance="me", session="chat", panel="chat"))
    message = page.get_by_role("textbox", name="Message")
    message.fill("hello console")
    message.press("Enter")  # Enter sends
    transcript = page.get_by_role("log", name="Transcript")
    expect(transcript.locator(".msg.user")).to_have_text(["hello console"])
    expect(transcript.locator(".msg.agent")).to_have_text(["You said: hello console"])
    expect(message).to_have_value("")

    message.fill("research tides")
    page.get_by_role("button", name="Send").click()
    # The slow tool reports progress while it runs; the run takes the steer at its next step.
    expect(transcript.locator(".tool .progress")).to_contain_text("researching tides")
    expect(transcript.locator(".tool .args")).to_contain_text('"topic": "tides"')
    message.fill("mind the moon")
    page.get_by_role("button", name="Steer").click()
    answer = transcript.locator(".msg.agent").last
    expect(answer).to_contain_text("Here is what I found: three findings about tides")
    expect(answer).to_contain_text("You also told me: mind the moon.")
    expect(transcript.locator(".tool .tool-result")).to_contain_text("three findings")
    expect(page.get_by_role("button", name="Steer")).to_be_disabled()  # nothing runs now
    screenshot(page, "chat")

    # The URL holds the session: a reload shows the same transcript, each message once.
    assert "agent=assistant" in page.url and "session=chat" in page.url
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(transcript.locator(".msg.agent")).to_have_count(2)
    expect(transcript.locator(".msg.user")).to_have_text(
        ["hello console", "research tides", "mind the moon"]
    )
    # The sessions panel lists it, with its status; a new session starts empty.
    sessions = page.get_by_role("complementary", name="Sessions")
    expect(sessions.get_by_role("link", name="me / chat")).to_be_visible()
    sessions.get_by_label("Session").fill("second")
    sessions.get_by_role("button", name="New session").click()
    expect(page).to_have_url(re.compile("session=second"))
    expect(transcript).to_contain_text("No messages yet")
    sessions.get_by_role("link", name="me / chat").click()  # and back, at once
    expect(transcript.locator(".msg.agent")).to_have_count(2)


def test_the_console_fits_a_phone(console: ConsoleServer, page: "Page") -> None:
    page.set_viewport_size({"width": 375, "height": 740})
    ready(page, console.ui(agent="assistant", instance="me", session="phone", panel="chat"))
    message = page.get_by_role("textbox", name="Message")
    message.fill("what time is it?")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".msg.agent")).to_contain_text("It is ")
    for name in ("Send", "Steer", "Follow-up", "Abort"):
        expect(page.get_by_role("button", name=name)).to_be_visible()
    assert page.evaluate("document.scrollingElement.scrollWidth") <= 375  # no sideways scroll
    sessions = page.get_by_role("complementary", name="Sessions")
    expect(sessions).to_be_hidden()
    page.get_by_role("button", name="Sessions").click()
    expect(sessions.get_by_role("link", name="me / phone")).to_be_visible()
    screenshot(page, "phone-sessions")
    sessions.get_by_role("link", name="me / phone").click()
    expect(sessions).to_be_hidden()
    screenshot(page, "phone-chat")
