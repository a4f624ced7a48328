"""A message a crash cut, in the canonical stream: marked interrupted, and superseded by the
answer the re-driven model call gives (fresh indexes, as an agentex server ignores an index
once it is Done, and the cut message's id), never shown twice."""

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import TypeAdapter

from tether.messages import Message, TextPart, ThinkingPart, ToolCallPart
from tether.records import (
    AssistantMessageCompleted,
    AssistantMessageStarted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    ExecutionEnded,
    ExecutionStarted,
    ModelCalled,
    Payload,
    UserMessage,
)
from tether.store import MemoryStore
from tether.stream import (
    ReasoningContent,
    StreamEvent,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TaskMessage,
    TextContent,
    project,
)

from .test_project import log_of

agentex = pytest.importorskip("agentex")
from agentex.types import TaskMessageUpdate  # noqa: E402

UPDATE: TypeAdapter[TaskMessageUpdate] = TypeAdapter(TaskMessageUpdate)
PARTIAL, ANSWER = "You sa", "You said: hello"


def cut(call_id: str = "m", *, thinking: str = "") -> list[Payload]:
    """What a killed worker left (a stream started, some deltas) and what recovery wrote."""
    streamed: list[Payload] = [AssistantMessageStarted(call_id=call_id, model="echo")]
    if thinking:
        streamed.append(AssistantThinkingDelta(call_id=call_id, text=thinking))
    streamed.append(AssistantTextDelta(call_id=call_id, text=PARTIAL))
    parts = (*((ThinkingPart(text=thinking),) if thinking else ()), TextPart(text=PARTIAL))
    closing = AssistantMessageCompleted(
        call_id=call_id, message=Message(role="assistant", parts=parts), interrupted=True
    )
    return [
        UserMessage(body="hello"),
        ExecutionStarted(harness="h", harness_version="1", input_count=1),
        ModelCalled(call_id=call_id, model="echo", input_hash="x"),
        *streamed,
        closing,
    ]


async def events_of(payloads: Sequence[Payload]) -> list[StreamEvent]:
    store = MemoryStore()
    cid = await log_of(store, payloads)
    events = list(project(await store.read(cid)))
    for event in events:  # every event is one of agentex's own updates, field for field
        wire = event.model_dump(mode="json", exclude_none=True)
        assert UPDATE.validate_python(wire).model_dump(mode="json", exclude_none=True) == wire
    return events


def shown(events: Sequence[StreamEvent]) -> dict[int | str, tuple[str, str, bool]]:
    """What a client keeping one map of messages shows, (type, text, interrupted) by message:
    its ``parent_task_message.id`` once an event names one (a superseding answer replaces
    the message of that id), else its index. No index is opened twice."""
    keys: dict[int, int | str] = {}
    slots: dict[int | str, tuple[str, str, bool]] = {}
    for event in events:
        assert event.index is not None
        if isinstance(event, StreamTaskMessageStart | StreamTaskMessageFull):
            assert event.index not in keys, f"index {event.index} opened again"
            parent = event.parent_task_message
            key = keys[event.index] = event.index if parent is None else str(parent.id)
            slots[key] = (event.content.type, _text(event.content), False)
            continue
        key = keys[event.index]
        if event.type == "delta" and event.delta is not None:
            kind, text, _ = slots[key]
            piece = getattr(event.delta, "text_delta", None) or getattr(
                event.delta, "content_delta", None
            )
            slots[key] = (kind, text + (piece or ""), False)
        elif isinstance(event, StreamTaskMessageDone) and event.parent_task_message is not None:
            # The Done names the message it closes: from now on it goes by that id.
            kind, text, _ = slots.pop(key)
            key = keys[event.index] = str(event.parent_task_message.id)
            slots[key] = (kind, text, event.parent_task_message.streaming_status != "DONE")
    return slots


def _text(content: Any) -> str:
    if isinstance(content, TextContent):
        return content.content
    if isinstance(content, ReasoningContent):
        return "".join(content.content or [])
    return ""


def marker(event: StreamEvent) -> TaskMessage:
    assert isinstance(event, StreamTaskMessageDone)
    assert event.parent_task_message is not None
    return event.parent_task_message


async def test_the_cut_is_marked_and_the_streamed_answer_supersedes_it_in_a_fresh_slot() -> None:
    events = await events_of(
        [
            *cut(),
            AssistantMessageStarted(call_id="m", model="echo"),
            AssistantTextDelta(call_id="m", text="You said: "),
            AssistantTextDelta(call_id="m", text="hello"),
            AssistantMessageCompleted(call_id="m", message=Message.assistant(ANSWER)),
            ExecutionEnded(output=ANSWER),
        ]
    )
    assert [(e.type, e.index) for e in events] == [
        ("full", 0),  # the user
        ("start", 1),
        ("delta", 1),
        ("done", 1),  # the cut
        ("start", 2),  # the answer, in a fresh slot, naming the cut message
        ("delta", 2),
        ("delta", 2),
        ("done", 2),
    ]
    closed = marker(events[3])
    assert closed == TaskMessage(
        content=TextContent(author="agent", content=PARTIAL, format="markdown"),
        task_id="c-1",
        id="c-1#1",
        streaming_status="IN_PROGRESS",
    )
    superseding = events[4]
    assert isinstance(superseding, StreamTaskMessageStart)
    assert superseding.parent_task_message is not None
    assert superseding.parent_task_message.id == closed.id
    assert events[-1] == StreamTaskMessageDone(index=2)  # the answer finished: no marker
    assert shown(events) == {0: ("text", "hello", False), "c-1#1": ("text", ANSWER, False)}


async def test_before_the_answer_comes_the_partial_shows_interrupted() -> None:
    events = await events_of(cut())
    assert shown(events)["c-1#1"] == ("text", PARTIAL, True)


async def test_no_index_is_updated_after_its_done_as_an_agentex_server_needs() -> None:
    """An agentex server drops any update to an index already Done or Full: no Start, Delta
    or Full goes to a closed index (only the cut's marking Done of a slot closed before)."""
    events = await events_of(
        [
            *cut(thinking="hmm"),
            AssistantMessageStarted(call_id="m", model="echo"),
            AssistantTextDelta(call_id="m", text=ANSWER),
            AssistantMessageCompleted(call_id="m", message=Message.assistant(ANSWER)),
        ]
    )
    closed: set[int] = set()
    for event in events:
        assert event.index is not None
        if not isinstance(event, StreamTaskMessageDone):
            assert event.index not in closed, event
        if isinstance(event, StreamTaskMessageDone | StreamTaskMessageFull):
            closed.add(event.index)
    assert shown(events)["c-1#2"] == ("text", ANSWER, False)


async def test_reasoning_and_text_of_a_cut_message_are_both_superseded() -> None:
    """Its reasoning, closed when the text began, is marked too (a second done)."""
    answer = Message(role="assistant", parts=(ThinkingPart(text="hmm, ok"), TextPart(text=ANSWER)))
    events = await events_of(
        [
            *cut(thinking="hmm"),
            AssistantMessageStarted(call_id="m", model="echo"),
            AssistantThinkingDelta(call_id="m", text="hmm, ok"),
            AssistantTextDelta(call_id="m", text=ANSWER),
            AssistantMessageCompleted(call_id="m", message=answer),
        ]
    )
    kinds = [(e.type, e.index) for e in events]
    assert kinds[:7] == [
        ("full", 0),
        ("start", 1),  # reasoning
        ("delta", 1),
        ("done", 1),  # closed where the text starts
        ("start", 2),
        ("delta", 2),
        ("done", 1),  # the cut: both slots, marked
    ]
    assert kinds[7] == ("done", 2)
    reasoning, text = marker(events[6]), marker(events[7])
    assert reasoning.content == ReasoningContent(author="agent", summary=[], content=["hmm"])
    assert reasoning.streaming_status == text.streaming_status == "IN_PROGRESS"
    assert kinds[8:] == [
        ("start", 3),
        ("delta", 3),
        ("done", 3),
        ("start", 4),
        ("delta", 4),
        ("done", 4),
    ]
    assert shown(events) == {
        0: ("text", "hello", False),
        "c-1#1": ("reasoning", "hmm, ok", False),
        "c-1#2": ("text", ANSWER, False),
    }


async def test_an_answer_not_streamed_supersedes_with_a_full() -> None:
    events = await events_of(
        [*cut(), AssistantMessageCompleted(call_id="m", message=Message.assistant(ANSWER))]
    )
    full = events[-1]
    assert isinstance(full, StreamTaskMessageFull) and full.index == 2
    assert full.parent_task_message is not None
    assert (full.parent_task_message.id, full.parent_task_message.streaming_status) == (
        "c-1#1",
        "DONE",
    )
    assert shown(events)["c-1#1"] == ("text", ANSWER, False)


async def test_only_the_same_model_call_supersedes_and_only_once() -> None:
    """An answer with no text leaves the cut marked; no other call takes its index."""
    asks = Message(role="assistant", parts=(ToolCallPart(call_id="t1", name="clock"),))
    events = await events_of(
        [
            *cut(),
            AssistantMessageCompleted(call_id="m", message=asks),
            AssistantMessageStarted(call_id="m2", model="echo"),
            AssistantTextDelta(call_id="m2", text="noon"),
            AssistantMessageCompleted(call_id="m2", message=Message.assistant("noon")),
        ]
    )
    slots = shown(events)
    assert slots["c-1#1"] == ("text", PARTIAL, True)
    assert slots[2] == ("tool_request", "", False)
    assert slots[3] == ("text", "noon", False)
    starts = [e for e in events if isinstance(e, StreamTaskMessageStart)]
    assert [e.index for e in starts] == [1, 3]
    assert starts[1].parent_task_message is None  # another call supersedes nothing


async def test_a_cut_with_nothing_streamed_adds_nothing() -> None:
    events = await events_of(
        [
            AssistantMessageStarted(call_id="m", model="echo"),
            AssistantMessageCompleted(call_id="m", message=Message.assistant(""), interrupted=True),
            AssistantMessageCompleted(call_id="m", message=Message.assistant(ANSWER)),
        ]
    )
    assert [(e.type, e.index) for e in events] == [("full", 0)]
    assert isinstance(events[0], StreamTaskMessageFull)
    assert events[0].parent_task_message is None


async def test_a_cut_reasoning_summary_closes_as_a_summary() -> None:
    """Summary deltas (OpenAI's reasoning summaries) stream as reasoning_summary in a slot
    that starts active; cut, the slot closes with the summary as it stood."""
    payloads = cut(thinking="hmm")
    payloads[4] = AssistantThinkingDelta(call_id="m", text="hmm", summary=True)
    events = await events_of(payloads)
    [start] = [e for e in events if isinstance(e, StreamTaskMessageStart) and e.index == 1]
    assert start.content == ReasoningContent(author="agent", summary=[], content=[], style="active")
    [delta] = [e for e in events if e.type == "delta" and e.index == 1]
    assert delta.model_dump(mode="json", exclude_none=True)["delta"] == {
        "type": "reasoning_summary",
        "summary_index": 0,
        "summary_delta": "hmm",
    }
    reasoning = marker([e for e in events if isinstance(e, StreamTaskMessageDone)][-2])
    assert reasoning.content == ReasoningContent(author="agent", summary=["hmm"], content=[])
