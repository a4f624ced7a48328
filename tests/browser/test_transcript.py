"""The transcript renders every shape of the canonical stream, those the demo agents never
send too (reasoning, a message a crash cut and the answer that supersedes it, a tool call
whose arguments stream, a failed tool, data events: approvals, inputs), fed to the page's own
renderer; and, live, a JSON answer, a follow-up, an abort, and the earlier part of a long
session read on demand."""

import re
from typing import TYPE_CHECKING, Any

import pytest

from .conftest import ConsoleServer, ready, screenshot

expect = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").expect

if TYPE_CHECKING:
    from playwright.sync_api import Page

Event = list[Any]  # [type, event, id], as the stream sends them (ids "<seq>:<n>")


def _full(at: str, index: int, kind: str, **content: Any) -> Event:
    return ["full", {"type": "full", "index": index, "content": {"type": kind, **content}}, at]


def _start(at: str, index: int, kind: str, **content: Any) -> Event:
    event = {
        "type": "start",
        "index": index,
        "content": {"type": kind, "author": "agent", **content},
    }
    return ["start", event, at]


def _delta(at: str, index: int, kind: str, **delta: Any) -> Event:
    return ["delta", {"type": "delta", "index": index, "delta": {"type": kind, **delta}}, at]


def _done(at: str, index: int) -> Event:
    return ["done", {"type": "done", "index": index}, at]


def _cut(at: str, index: int, text: str) -> Event:
    """The Done of a message a crash cut: its message as it stood, never finished."""
    message = {
        "content": {"type": "text", "author": "agent", "content": text, "format": "markdown"},
        "task_id": "c",
        "id": f"c#{index}",
        "streaming_status": "IN_PROGRESS",
    }
    return ["done", {"type": "done", "index": index, "parent_task_message": message}, at]


def _superseding(at: str, index: int, message_id: str) -> Event:
    """The Start of the answer that supersedes the cut message ``message_id``."""
    content = {"type": "text", "author": "agent", "content": "", "format": "markdown"}
    message = {"content": content, "task_id": "c", "id": message_id}
    event = {"type": "start", "index": index, "content": content, "parent_task_message": message}
    return ["start", event, at]


LOOKUP = {"name": "lookup", "tool_call_id": "c1"}
EVENTS = [
    _full("3:0", 0, "text", author="user", content="think"),
    _start("5:0", 1, "reasoning", summary=[], content=[""]),
    _delta("5:1", 1, "reasoning_content", content_index=0, content_delta="Let me see."),
    _done("6:0", 1),  # the reasoning ends where the answer's text starts
    _start("6:1", 2, "text", content=""),
    _delta("6:2", 2, "text", text_delta="A cut ans"),
    _cut("7:0", 2, "A cut ans"),  # ... a crash cut it
    _superseding("9:0", 14, "c#2"),  # the answer, asked for again, in a fresh slot
    _delta("9:1", 14, "text", text_delta='{"answer": 42, '),
    _delta("10:0", 14, "text", text_delta='"sure": true}'),
    _start("11:0", 3, "tool_request", arguments={}, **LOOKUP),
    _delta("11:1", 3, "tool_request", arguments_delta='{"q": "ti', **LOOKUP),
    _delta("12:0", 3, "tool_request", arguments_delta='des"}', **LOOKUP),
    _done("13:0", 14),
    _done("13:1", 3),
    _full(
        "14:0", 4, "tool_response", author="agent", content="no such page", is_error=True, **LOOKUP
    ),
    _full(
        "15:0",
        5,
        "data",
        author="agent",
        data={
            "kind": "approval_requested",
            "tool": "send_email",
            "args": {"to": "a@b.c"},
            "metadata": {"reason": "external recipient"},
        },
    ),
    _full(
        "16:0",
        6,
        "data",
        author="agent",
        data={
            "kind": "task_spawned",
            "agent": "researcher",
            "streamUrl": "/agents/researcher/me?session=task-1",
        },
    ),
    _full(
        "17:0", 7, "data", author="user", data={"kind": "signal", "type": "webhook", "body": "ping"}
    ),
    _full(
        "18:0",
        8,
        "data",
        author="agent",
        data={
            "kind": "input_requested",
            "prompt": "Which city?",
            "answerSchema": {"type": "string"},
        },
    ),
    _full(
        "19:0",
        9,
        "data",
        author="user",
        data={"kind": "input_answered", "value": "Paris", "responder": "ann"},
    ),
    _full(
        "20:0",
        10,
        "data",
        author="agent",
        data={
            "kind": "submission_settled",
            "status": "failed",
            "error": "boom",
            "errorCode": "run_failed",
        },
    ),
    _full("21:0", 11, "text", author="user", content="say nothing"),
    _full(
        "22:0",
        12,
        "data",
        author="agent",
        data={"kind": "submission_settled", "status": "succeeded"},
    ),
    _full(
        "23:0",
        13,
        "data",
        author="agent",
        data={"kind": "submission_settled", "status": "succeeded"},
    ),
]
RENDER = """async ([events]) => {
  const { Transcript } = await import("/ui/transcript.js");
  const root = document.createElement("div");
  root.id = "synthetic";
  document.body.append(root);
  const transcript = new Transcript(root, { onOpenApprovals: () => {} });
  let cut = null;
  for (const [type, event, id] of events) {
    transcript.apply(type, event);
    if (id === "7:0") {
      const shown = root.querySelector(".msg.agent.interrupted");
      cut = shown && { text: shown.textContent, streaming: shown.classList.contains("streaming") };
    }
    if (id === "11:1") transcript.progress({ callId: "c1", text: "looking up tides" });
  }
  return cut;
}"""


def test_every_event_shape_renders(console: ConsoleServer, page: "Page") -> None:
    ready(page, console.ui())
    cut = page.evaluate(RENDER, [EVENTS])
    root = page.locator("#synthetic")
    # The cut message is shown as interrupted until the answer takes its place.
    assert cut == {"text": "A cut ans", "streaming": False}
    expect(root.locator(".msg.agent", has_text="A cut ans")).to_have_count(0)
    expect(root.locator(".msg.agent")).to_have_count(1)
    expect(root.locator(".interrupted")).to_have_count(0)
    # In the partial's place: after the reasoning, before the tool call.
    order = root.locator("details.reasoning, .msg.agent, .tool")
    expect(order.nth(1)).to_have_class(re.compile(r"\bmsg\b"))
    expect(order.nth(2)).to_have_class(re.compile(r"\btool\b"))
    reasoning = root.locator("details.reasoning")
    expect(reasoning).not_to_have_attribute("open", "")  # collapsed
    expect(reasoning.locator("summary")).to_have_text("Reasoning")
    expect(reasoning).to_contain_text("Let me see.")
    expect(root.locator(".msg.agent .json.result")).to_have_text(
        '{\n  "answer": 42,\n  "sure": true\n}'
    )
    tool = root.locator(".tool")
    expect(tool).to_have_count(1)
    expect(tool.locator(".args")).to_have_text('{\n  "q": "tides"\n}')
    expect(tool).to_have_class(re.compile(r"\berror\b"))
    expect(tool.locator(".tool-result")).to_contain_text("no such page")
    expect(root.locator(".notice.approval")).to_contain_text("Waiting for approval: send_email")
    # What the framework attached to its ask (pydantic-ai's ApprovalRequired metadata).
    expect(root.locator(".notice.approval .metadata")).to_contain_text("external recipient")
    link = root.get_by_role("link", name="researcher / task-1")
    expect(link).to_have_attribute("href", re.compile(r"agent=researcher.*session=task-1"))
    expect(root.locator(".notice.signal")).to_have_text("Signal webhook: ping")
    expect(root.locator(".notice.input")).to_contain_text("Waiting for input: Which city?")
    expect(root.locator(".notice.answer")).to_contain_text('answered by ann: "Paris"')
    expect(root.get_by_role("alert")).to_have_text("failed: boom (run_failed)")
    # A run that answered with no text says so, once (a steer that joined it settles too).
    expect(root.locator(".notice.settled.empty")).to_have_text("Answered with no text.")


def test_a_json_answer_a_follow_up_an_abort_and_earlier_messages(
    console: ConsoleServer, page: "Page"
) -> None:
    ready(page, console.ui(agent="assistant", instance="me", session="t", panel="chat"))
    message = page.get_by_role("textbox", name="Message")
    transcript = page.get_by_role("log", name="Transcript")
    page.locator("details.options summary").click()
    page.get_by_label("Result schema (JSON)").fill(
        '{"type": "object", "properties": {"city": {"type": "string"}}}'
    )
    message.fill("where?")
    message.press("Enter")
    expect(transcript.locator(".json.result")).to_have_text('{\n  "city": "example"\n}')
    page.get_by_label("Result schema (JSON)").fill("")

    message.fill("research tides")
    message.press("Enter")
    expect(transcript.locator(".tool .progress")).to_contain_text("researching tides")
    message.fill("and then?")
    page.get_by_role("button", name="Follow-up").click()
    expect(transcript.locator(".msg.agent").last).to_have_text("You said: and then?")

    message.fill("research the moon")
    message.press("Enter")
    expect(transcript.locator(".tool .progress").last).to_contain_text("researching the moon")
    page.get_by_role("button", name="Abort").click()
    expect(transcript.get_by_role("alert")).to_have_text("aborted")
    expect(page.get_by_role("button", name="Abort")).to_be_disabled()
    screenshot(page, "chat-abort")
    # The abort is said the same after a reload (the stream carries the settlement); the
    # research call it cut has a result, so the session's next turn is answered.
    page.reload()
    page.wait_for_selector("body[data-ready]", state="attached")
    expect(transcript.get_by_role("alert")).to_have_text("aborted")
    expect(transcript.locator(".tool.error .tool-result").last).to_contain_text("aborted")
    message.fill("what time is it?")
    message.press("Enter")
    expect(transcript.locator(".msg.agent").last).to_contain_text("UTC")

    # Opened with a window of 12 records, the rest is read on demand, in order, once.
    page.goto(console.ui(agent="assistant", instance="me", session="t", window="12"))
    page.wait_for_selector("body[data-ready]", state="attached")
    users = transcript.locator(".msg.user")
    expect(users).to_have_text(["what time is it?"])
    earlier = page.get_by_role("button", name="Show earlier messages")
    for _ in range(20):
        if not earlier.count():
            break
        earlier.click()
        expect(page.locator(".earlier button:disabled")).to_have_count(0)  # read and shown
    expect(users).to_have_text(
        ["where?", "research tides", "and then?", "research the moon", "what time is it?"]
    )
