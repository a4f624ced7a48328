"""A server killed with SIGKILL mid-answer and started again on the same port and store: the
page, left open, reconnects by itself (the browser's EventSource, with Last-Event-ID) and
ends up showing the final answer once: neither the partial answer the crash cut nor a
repeated message."""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page

TEXT = "the quick brown fox jumps over the lazy dog"
ANSWER = f"You said: {TEXT}"


def test_a_kill_mid_answer_and_a_restart_leave_the_answer_once(
    make_console: Callable[..., ConsoleServer], tmp_path: Path, page: "Page"
) -> None:
    gate = tmp_path / "gate"  # the slow agent stops half-way through its answer, until then
    console = make_console(TETHER_TEST_GATE=str(gate))
    page.add_init_script(
        "window.streamsOpened = 0; const Native = window.EventSource;"
        "window.EventSource = class extends Native {"
        "  constructor(...args) { super(...args); window.streamsOpened += 1; } };"
    )
    ready(page, console.ui(agent="slow", instance="me", session="crash", panel="chat"))
    page.get_by_role("textbox", name="Message").fill(TEXT)
    page.get_by_role("button", name="Send").click()
    transcript = page.get_by_role("log", name="Transcript")
    answers = transcript.locator(".msg.agent")
    expect(answers).to_have_count(1)
    expect(answers).to_contain_text("You said: the q")  # half of it, durable: shown from the log
    assert ANSWER not in answers.inner_text()

    console.kill()
    expect(page.locator("#connection")).to_have_text("reconnecting")
    gate.touch()
    console.start()  # again: the same port, the same SQLite directory

    # The run is taken over, the cut stream closed as interrupted, the answer streamed again.
    expect(answers.filter(has_text=ANSWER)).to_have_count(1)
    expect(page.locator(".msg.agent.streaming")).to_have_count(0)
    expect(answers).to_have_count(1)  # the partial, marked interrupted, superseded in place
    expect(transcript.locator(".msg.user")).to_have_text([TEXT])
    expect(page.locator("#connection")).to_have_text("live")
    # One EventSource all along: the browser reconnected it with Last-Event-ID.
    assert page.evaluate("window.streamsOpened") == 1
    screenshot(page, "recovered")
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(answers).to_have_text([ANSWER])
