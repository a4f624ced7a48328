"""The protocol views of the canonical stream: AG-UI events (each parsed with the
``ag-ui-protocol`` package's models) and the AI SDK's UI message stream parts, for every way
a submission settles."""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from tether.messages import Mediation, Message, TextPart, ThinkingPart, ToolCallPart
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    ExecutionEnded,
    ExecutionStarted,
    InputRequested,
    Payload,
    Record,
    RecordDraft,
    SettlementStatus,
    SubmissionSettled,
    ToolCalled,
    ToolOutcome,
    UserMessage,
)
from tether.store import MemoryStore, SessionKey
from tether.stream import AgUiProjector, AiSdkProjector, RunProjector

AG_UI = TypeAdapter[Any](Event)


async def log(*runs: Sequence[Payload]) -> list[Record]:
    """A log of one submission per run (``s1``, ``s2``...)."""
    store = MemoryStore()
    conversation, _ = await store.ensure_conversation(
        SessionKey("a", "i", "chat-1"), conversation_id="c-1", created_at=datetime.now(UTC)
    )
    drafts = [
        RecordDraft(payload, submission_id=f"s{n}")
        for n, payloads in enumerate(runs, 1)
        for payload in payloads
    ]
    await store.append(conversation.id, drafts, expected_seq=1, fence=0)
    return await store.read(conversation.id)


def started() -> list[Payload]:
    return [
        UserMessage(body="what time is it?"),
        ExecutionStarted(harness="h", harness_version="1", input_count=1),
    ]


def turn() -> list[Payload]:
    answer = Message(
        role="assistant",
        parts=(
            ThinkingPart(text="let me see"),
            TextPart(text="Checking."),
            ToolCallPart(call_id="t1", name="clock"),
        ),
    )
    return [
        *started(),
        AssistantMessageStarted(call_id="m1"),
        AssistantThinkingDelta(call_id="m1", text="let me "),
        AssistantThinkingDelta(call_id="m1", text="see"),
        AssistantTextDelta(call_id="m1", text="Check"),
        AssistantTextDelta(call_id="m1", text="ing."),
        AssistantMessageCompleted(call_id="m1", message=answer),
        ToolCalled(
            call_id="t1", tool="clock", args={}, idempotency_key="k", mediation=Mediation.HOST
        ),
        ToolOutcome(call_id="t1", content="noon"),
        AssistantMessageStarted(call_id="m2"),
        AssistantMessageCompleted(call_id="m2", message=Message.assistant("It is noon.")),
        ExecutionEnded(),
    ]


SETTLEMENTS = {
    "completed": SubmissionSettled(status=SettlementStatus.SUCCEEDED, result="It is noon."),
    "aborted": SubmissionSettled(status=SettlementStatus.ABORTED, error="aborted by ann"),
    "failed": SubmissionSettled(status=SettlementStatus.FAILED, error="boom", error_code="tool"),
    "budget": SubmissionSettled(
        status=SettlementStatus.FAILED, error="model calls", error_code="budget_exhausted"
    ),
    "timeout": SubmissionSettled(
        status=SettlementStatus.FAILED, error="too long", error_code="timeout_exceeded"
    ),
}


def feed(projector: RunProjector, records: Sequence[Record]) -> list[dict[str, Any]]:
    return [event for record in records for event in projector.feed(record)]


def check_ag_ui(events: Sequence[dict[str, Any]]) -> None:
    """Every event parses as the protocol's, and they nest as its verifier wants: runs do not
    overlap, messages and tool calls open before their content and close once."""
    run = None
    messages: set[str] = set()
    calls: set[str] = set()
    for event in events:
        parsed = AG_UI.validate_python(event)
        assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == event
        kind = event["type"]
        if kind == "RUN_STARTED":
            assert run is None
            run = event["runId"]
            continue
        assert run is not None, f"{kind} outside a run"
        if kind in ("RUN_FINISHED", "RUN_ERROR"):
            assert not messages and not calls, (messages, calls)
            run = None
        elif kind in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            assert event["messageId"] not in messages
            messages.add(event["messageId"])
        elif kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            assert event["messageId"] in messages
        elif kind in ("TEXT_MESSAGE_END", "REASONING_MESSAGE_END"):
            messages.remove(event["messageId"])
        elif kind == "TOOL_CALL_START":
            calls.add(event["toolCallId"])
        elif kind == "TOOL_CALL_END":
            calls.remove(event["toolCallId"])
    assert run is None


@pytest.mark.parametrize("how", list(SETTLEMENTS))
async def test_every_settlement_ends_the_ag_ui_run(how: str) -> None:
    records = await log([*turn(), SETTLEMENTS[how]])
    events = feed(AgUiProjector(), records)
    check_ag_ui(events)
    kinds = [event["type"] for event in events]
    assert kinds[:4] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    assert events[0] == {"type": "RUN_STARTED", "threadId": "chat-1", "runId": "s1"}
    assert events[1]["role"] == "user"
    assert "REASONING_START" in kinds and "TOOL_CALL_RESULT" in kinds
    end = events[-1]
    if how == "completed":
        assert end == {
            "type": "RUN_FINISHED",
            "threadId": "chat-1",
            "runId": "s1",
            "result": "It is noon.",
        }
    elif how == "aborted":
        assert end["type"] == "RUN_FINISHED" and end["outcome"] == {"type": "cancelled"}
    else:
        code = SETTLEMENTS[how].error_code
        assert end == {"type": "RUN_ERROR", "message": SETTLEMENTS[how].error, "code": code}


@pytest.mark.parametrize("how", list(SETTLEMENTS))
async def test_every_settlement_finishes_the_ai_sdk_message(how: str) -> None:
    records = await log([*turn(), SETTLEMENTS[how]])
    parts = feed(AiSdkProjector(), records)
    kinds = [part["type"] for part in parts]
    assert kinds[0] == "start" and parts[0]["messageId"] == "s1"
    assert kinds.count("start-step") == kinds.count("finish-step") == 2
    assert kinds[-1] == "finish"
    ending = {
        "completed": ["finish-step", "finish"],
        "aborted": ["finish-step", "abort", "finish"],
    }.get(how, ["finish-step", "error", "finish"])
    assert kinds[-len(ending) :] == ending
    if how in ("budget", "timeout", "failed"):
        assert parts[-2]["errorText"].startswith(f"{SETTLEMENTS[how].error_code}: ")
        assert parts[-1]["finishReason"] == "error"
    text = "".join(p["delta"] for p in parts if p["type"] == "text-delta")
    assert text == "Checking.It is noon."
    assert next(p for p in parts if p["type"] == "data-user-message")["data"] == {
        "text": "what time is it?"
    }


async def test_a_parked_run_ends_a_reply_as_an_ag_ui_interrupt() -> None:
    answer = Message(
        role="assistant", parts=(ToolCallPart(call_id="t1", name="send", args={"to": "bob"}),)
    )
    records = await log(
        [*turn(), SETTLEMENTS["completed"]],
        [
            *started(),
            AssistantMessageStarted(call_id="m3"),
            AssistantMessageCompleted(call_id="m3", message=answer),
            ApprovalRequested(
                approval_id="c-1.20", call_id="t1", tool="send", args={"to": "bob"}, args_digest="d"
            ),
            InputRequested(input_id="c-1.21", call_id="t2", tool="ask", args={}, prompt="Why?"),
        ],
    )
    projector = AgUiProjector(submission="s2", users=False)
    events = feed(projector, records) + projector.close()
    check_ag_ui(events)
    assert events[0] == {"type": "RUN_STARTED", "threadId": "chat-1", "runId": "s2"}
    assert not [e for e in events if e.get("role") == "user"]
    assert [e["name"] for e in events if e["type"] == "CUSTOM"] == [
        "approval_requested",
        "input_requested",
    ]
    assert events[-1]["outcome"] == {
        "type": "interrupt",
        "interrupts": [
            {"id": "c-1.20", "reason": "approval", "toolCallId": "t1"},
            {"id": "c-1.21", "reason": "input", "toolCallId": "t2", "message": "Why?"},
        ],
    }
    parts = feed(AiSdkProjector(submission="s2", users=False), records)
    assert parts[0] == {"type": "start", "messageId": "s2"}
    assert {"type": "tool-approval-request", "approvalId": "c-1.20", "toolCallId": "t1"} in parts


async def test_an_answered_wait_is_no_interrupt() -> None:
    records = await log(
        [
            *started(),
            ApprovalRequested(
                approval_id="c-1.3", call_id="t1", tool="send", args={}, args_digest="d"
            ),
            ApprovalDecided(approval_id="c-1.3", call_id="t1", decision="approve", approver="ann"),
        ]
    )
    projector = AgUiProjector()
    feed(projector, records)
    assert projector.close() == []


async def test_what_no_submission_wrote_is_a_run_of_its_own() -> None:
    """A retention cut's transcript has no submission: its run ends before the next one."""
    store = MemoryStore()
    conversation, _ = await store.ensure_conversation(
        SessionKey("a", "i", "chat-1"), conversation_id="c-1", created_at=datetime.now(UTC)
    )
    drafts = [RecordDraft(UserMessage(body="kept from before"))]
    drafts += [RecordDraft(p, submission_id="s1") for p in [*turn(), SETTLEMENTS["completed"]]]
    await store.append(conversation.id, drafts, expected_seq=1, fence=0)
    records = await store.read(conversation.id)
    events = feed(AgUiProjector(), records)
    check_ag_ui(events)
    runs = [(e["type"], e.get("runId")) for e in events if e["type"].startswith("RUN_")]
    assert runs == [
        ("RUN_STARTED", "c-1:2"),
        ("RUN_FINISHED", "c-1:2"),
        ("RUN_STARTED", "s1"),
        ("RUN_FINISHED", "s1"),
    ]
    parts = feed(AiSdkProjector(), records)
    assert [p["messageId"] for p in parts if p["type"] == "start"] == ["c-1:2", "s1"]
    assert [p["type"] for p in parts].count("finish") == 2
