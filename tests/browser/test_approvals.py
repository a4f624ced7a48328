"""The approvals inbox in the browser: gates of two sessions with their tool, arguments and
digest, the badge counting them live, an edit the server refuses shown inline, a
rejection with its reason, an approval, and who decided what."""

from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page


def _email(console: ConsoleServer, session: str, to: str) -> None:
    """A message that parks on the gated send_email tool (sent by another client)."""
    answer = httpx.post(
        f"{console.url}/agents/assistant/me",
        json={"body": f"email {to}: lunch at noon?", "session": session},
        timeout=30,
    )
    assert answer.status_code == 202, answer.text


def test_approve_and_reject_from_the_inbox(console: ConsoleServer, page: "Page") -> None:
    ready(page, console.ui(agent="assistant", instance="me", session="a", panel="approvals"))
    badge = page.locator("#approvals-badge")
    expect(badge).to_be_hidden()
    _email(console, "a", "ann@example.com")
    _email(console, "b", "bob@example.com")
    expect(badge).to_have_text("2")  # live: nobody reloaded
    pending = page.locator("#pending .gate")
    expect(pending).to_have_count(2)
    ann = pending.filter(has_text="ann@example.com")
    expect(ann).to_contain_text("send_email")
    expect(ann.locator(".digest")).to_contain_text("sha256:")

    # Edit: the arguments as JSON, checked as JSON as they are typed; the server checks them
    # against the tool's schema, and its refusal is shown under the editor.
    ann.get_by_role("button", name="Edit").click()
    editor = ann.get_by_role("textbox", name="Edited arguments (JSON)")
    expect(editor).to_have_value('{\n  "text": "lunch at noon?",\n  "to": "ann@example.com"\n}')
    editor.fill('{"to": "amy@example.com"')
    expect(ann.locator(".editor .error")).to_contain_text("Not JSON")
    expect(ann.get_by_role("button", name="Approve with edits")).to_be_disabled()
    editor.fill('{"to": 7, "text": "x"}')
    expect(ann.locator(".editor .error")).to_have_text("")
    ann.get_by_role("button", name="Approve with edits").click()
    expect(ann.locator(".editor .error")).to_contain_text("7 is not of type 'string'")
    expect(badge).to_have_text("2")  # refused: still waiting
    editor.fill('{"to": "amy@example.com", "text": "lunch at one?"}')
    expect(ann.locator(".editor .error")).to_have_text("")
    screenshot(page, "approvals")
    ann.get_by_role("button", name="Approve with edits").click()
    expect(badge).to_have_text("1")

    bob = pending.filter(has_text="bob@example.com")
    bob.get_by_role("textbox", name="Reason").fill("not today")
    bob.get_by_role("button", name="Reject").click()
    expect(badge).to_be_hidden()
    expect(page.locator("#pending")).to_contain_text("Nothing waits for a decision.")

    decided = page.locator("#decided li")
    expect(decided).to_have_count(2)
    expect(decided.filter(has_text="reject")).to_contain_text("by console")
    expect(decided.filter(has_text="reject")).to_contain_text("Reason: not today")
    expect(decided.filter(has_text="edit")).to_contain_text("amy@example.com")
    screenshot(page, "approvals-decided")

    # The sessions went on: the edited email was sent, the rejected one was not.
    page.get_by_role("link", name="Chat").click()
    transcript = page.get_by_role("log", name="Transcript")
    expect(transcript.locator(".msg.agent")).to_contain_text("Email sent: dry-run email to amy")
    page.get_by_role("complementary", name="Sessions").get_by_role("link", name="me / b").click()
    expect(transcript.locator(".msg.agent")).to_contain_text("I did not send the email")


def test_approve_from_the_inbox(console: ConsoleServer, page: "Page") -> None:
    ready(page, console.ui(agent="assistant", instance="me", session="c", panel="approvals"))
    _email(console, "c", "cy@example.com")
    gate = page.locator("#pending .gate").filter(has_text="cy@example.com")
    gate.get_by_role("button", name="Approve").click()
    expect(page.locator("#decided li").first).to_contain_text("approve send_email by console")
    page.get_by_role("link", name="Chat").click()
    expect(page.locator(".msg.agent")).to_contain_text("Email sent: dry-run email to cy")
