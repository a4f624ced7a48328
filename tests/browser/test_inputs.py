"""The console's questions, beside the approvals: a run that asks (``turn.ask``) is listed
with its prompt and schema, counted on the badge, answered (JSON if it parses, else text; an
answer its schema refuses is refused by the server, shown on the card), and resumed."""

from typing import TYPE_CHECKING

import httpx
import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from collections.abc import Callable

    from playwright.sync_api import Page


def test_answer_a_question_from_the_console(
    make_console: "Callable[..., ConsoleServer]", page: "Page"
) -> None:
    # The demo and the asking agent of the CLI tests (the last --app is the one served).
    console = make_console("--app", "tests.cli.asking:agents")
    ready(page, console.ui(agent="asker", instance="me", panel="approvals"))
    badge = page.locator("#approvals-badge")
    expect(badge).to_be_hidden()
    expect(page.locator("#inputs")).to_contain_text("No run waits for an answer.")
    sent = httpx.post(f"{console.url}/agents/asker/me", json={"body": "hi"}, timeout=30)
    assert sent.status_code == 202, sent.text
    expect(badge).to_have_text("1")  # live: nobody reloaded
    card = page.locator("#inputs .gate")
    expect(card).to_have_count(1)
    expect(card.locator(".prompt")).to_have_text("What is your name?")
    expect(card.locator(".schema")).to_contain_text('"type": "string"')

    answer = card.get_by_role("textbox", name="Answer (JSON, or text)")
    answer.fill("42")  # JSON: a number, which the schema refuses (the server says so)
    card.get_by_role("button", name="Answer").click()
    expect(card.locator(".error")).to_contain_text("does not fit its schema: 42 is not of type")
    answer.fill("Ann")  # not JSON: the text
    expect(card.locator(".error")).to_have_text("")
    screenshot(page, "inputs")
    card.get_by_role("button", name="Answer").click()
    expect(page.locator("#inputs")).to_contain_text("No run waits for an answer.")
    expect(badge).to_be_hidden()

    submission = sent.json()["submissionId"]
    settled = httpx.get(
        f"{console.url}/submissions/{submission}", params={"wait": True}, timeout=90
    ).json()
    assert settled["settlement"] == {"status": "succeeded", "result": "Hello, Ann!"}
    answered = httpx.get(f"{console.url}/inputs", params={"status": "answered"}, timeout=30)
    [item] = answered.json()["inputs"]
    assert item["answer"] == "Ann" and item["responder"] == "console"
