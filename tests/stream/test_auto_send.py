"""UnifiedEmitter.auto_send_turn (reference K.112-117): a framework turn into the durable log."""

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.journal import Journal, Turn
from tether.store import Store
from tether.stream import (
    HarnessTurn,
    SpanSignal,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolRequestDelta,
    ToolResponseContent,
    TurnResult,
    TurnUsage,
    UnifiedEmitter,
    project,
)

from ..engine.test_runtime import settle

Make = Callable[..., Runtime]


def text(content: str = "") -> TextContent:
    return TextContent(author="agent", content=content)


def start(index: int | None, content: Any) -> StreamTaskMessageStart:
    return StreamTaskMessageStart(index=index, content=content)


def delta(index: int | None, chunk: str) -> StreamTaskMessageDelta:
    return StreamTaskMessageDelta(index=index, delta=TextDelta(text_delta=chunk))


def done(index: int) -> StreamTaskMessageDone:
    return StreamTaskMessageDone(index=index)


def full(index: int, content: Any) -> StreamTaskMessageFull:
    return StreamTaskMessageFull(index=index, content=content)


REQUEST = ToolRequestContent(author="agent", name="clock", tool_call_id="c", arguments={})
RESPONSE = ToolResponseContent(author="agent", name="clock", tool_call_id="c", content="noon")


class ScriptedTurn:
    """A framework turn: its events, then usage that is only filled in by exhaustion."""

    def __init__(self, events: list[StreamEvent], *, fail_at: int | None = None) -> None:
        self._events = events
        self._fail_at = fail_at
        self._usage = TurnUsage(model="scripted")
        self.pulled = 0

    @property
    def events(self) -> AsyncIterator[StreamEvent]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[StreamEvent]:
        for position, event in enumerate(self._events):
            if position == self._fail_at:
                raise RuntimeError("the framework broke")
            self.pulled += 1
            yield event
        self._usage = TurnUsage(model="scripted", output_tokens=7, num_tool_calls=1)

    def usage(self) -> TurnUsage:
        return self._usage


class Sender:
    """A harness that writes one scripted framework turn per execution into the log."""

    name, version = "tap-test", "1"

    def __init__(self, make: Callable[[], ScriptedTurn], tracer: Any = None) -> None:
        self.make = make
        self.emitter = UnifiedEmitter(tracer=tracer)
        self.results: list[TurnResult] = []
        self.turns: list[ScriptedTurn] = []

    async def run(self, turn: Turn) -> JsonValue:
        tapped = self.make()
        self.turns.append(tapped)
        assert isinstance(tapped, HarnessTurn)
        result = await self.emitter.auto_send_turn(tapped, turn)
        self.results.append(result)
        return result.final_text


async def send(make_runtime: Make, sender: Sender) -> tuple[dict[str, JsonValue], str]:
    agents = {"tap": AgentDefinition(lambda i, e: AgentSpec(harness=sender), max_attempts=1)}
    async with make_runtime(agents) as runtime:
        receipt = await runtime.dispatch("tap", "me", "go")
        return await settle(runtime, receipt.submission_id), receipt.conversation_id


def canonical(events: list[StreamEvent]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json", exclude_none=True) for e in events]


async def test_streamed_text_lands_as_deltas_and_a_completion(
    make_runtime: Make, store: Store
) -> None:
    sender = Sender(
        lambda: ScriptedTurn([start(0, text()), delta(0, "Hi"), delta(0, " there"), done(0)])
    )
    settled, conversation_id = await send(make_runtime, sender)
    assert settled["result"] == "Hi there"
    records = await store.read(conversation_id)
    kinds = [r.kind for r in records]
    assert kinds[kinds.index("model_called") :] == [
        "model_called",
        "assistant_message_started",
        "assistant_text_delta",
        "assistant_message_completed",
        "step_recorded",
        "execution_ended",
        "submission_settled",
    ]
    events = canonical(list(project(records)))
    assert [e["type"] for e in events] == ["full", "start", "delta", "done", "full"]
    assert events[2]["delta"]["text_delta"] == "Hi there"


async def test_a_full_text_sets_the_final_text(make_runtime: Make) -> None:
    sender = Sender(lambda: ScriptedTurn([full(0, text("whole"))]))
    settled, _ = await send(make_runtime, sender)
    assert settled["result"] == "whole"


async def test_the_final_text_is_the_last_segment_and_tools_are_reported(
    make_runtime: Make, store: Store
) -> None:
    events: list[StreamEvent] = [
        start(0, text()),
        delta(0, "A"),
        done(0),
        start(1, REQUEST),
        StreamTaskMessageDelta(
            index=1,
            delta=ToolRequestDelta(tool_call_id="c", name="clock", arguments_delta='{"tz":'),
        ),
        StreamTaskMessageDelta(
            index=1,
            delta=ToolRequestDelta(tool_call_id="c", name="clock", arguments_delta='"UTC"}'),
        ),
        done(1),
        full(2, RESPONSE),
        start(3, text()),
        delta(3, "B"),
        done(3),
    ]
    sender = Sender(lambda: ScriptedTurn(events))
    settled, conversation_id = await send(make_runtime, sender)
    assert settled["result"] == "B"
    records = await store.read(conversation_id)
    completions = [r.payload for r in records if r.kind == "assistant_message_completed"]
    first = completions[0].message  # type: ignore[attr-defined]
    assert first.text == "A"
    assert [(p.call_id, p.args) for p in first.tool_calls] == [("c", {"tz": "UTC"})]
    outcome = next(r.payload for r in records if r.kind == "tool_outcome")
    assert outcome.content == "noon" and not outcome.is_error  # type: ignore[attr-defined]
    projected = canonical(list(project(records)))
    kinds = [e["content"]["type"] for e in projected if e["type"] in ("start", "full")]
    assert kinds == ["text", "text", "tool_request", "tool_response", "text", "data"]
    assert sender.results[0].usage == TurnUsage(model="scripted", output_tokens=7, num_tool_calls=1)


async def test_interleaved_slots_route_to_their_own_parts_and_strays_are_dropped(
    make_runtime: Make, store: Store
) -> None:
    events: list[StreamEvent] = [
        start(0, text()),
        start(1, text()),
        delta(0, "a"),
        delta(1, "b"),
        delta(7, "lost"),  # no such slot
        delta(None, "nowhere"),
        delta(0, "c"),
        done(0),
        done(1),
    ]
    sender = Sender(lambda: ScriptedTurn(events))
    settled, conversation_id = await send(make_runtime, sender)
    assert settled["result"] == "b"
    completion = next(
        r.payload
        for r in await store.read(conversation_id)
        if r.kind == "assistant_message_completed"
    )
    assert [p.text for p in completion.message.parts] == ["ac", "b"]  # type: ignore[attr-defined]


async def test_a_source_failure_propagates_and_spans_are_flushed(make_runtime: Make) -> None:
    signals: list[SpanSignal] = []
    sender = Sender(
        lambda: ScriptedTurn([full(0, REQUEST), full(1, text("x"))], fail_at=1),
        tracer=signals.append,
    )
    settled, _ = await send(make_runtime, sender)
    assert settled["status"] == "failed" and "the framework broke" in str(settled["error"])
    assert [type(s).__name__ for s in signals] == ["OpenSpan", "CloseSpan"]
    assert getattr(signals[1], "is_complete", None) is False


async def test_a_replay_serves_the_turn_without_pulling_the_framework(
    make_runtime: Make, store: Store
) -> None:
    events: list[StreamEvent] = [full(0, text("A")), full(1, REQUEST), full(2, RESPONSE)]
    events += [start(3, text()), delta(3, "B"), done(3)]
    sender = Sender(lambda: ScriptedTurn(events))
    settled, conversation_id = await send(make_runtime, sender)
    replaying = Sender(lambda: ScriptedTurn(events, fail_at=0))
    journal = await Journal.open(store, conversation_id, fence=0)
    assert await journal.replay(replaying) == [settled["result"]]
    assert replaying.turns[0].pulled == 0
    assert replaying.results == sender.results


@pytest.mark.parametrize("tracing", [False, True])
async def test_spans_match_what_yield_turn_derives(make_runtime: Make, tracing: bool) -> None:
    events: list[StreamEvent] = [full(0, REQUEST), full(1, RESPONSE), full(2, text("ok"))]
    sent: list[SpanSignal] = []
    yielded: list[SpanSignal] = []
    await send(
        make_runtime, Sender(lambda: ScriptedTurn(events), tracer=sent.append if tracing else None)
    )
    async for _ in UnifiedEmitter(tracer=yielded.append).yield_turn(ScriptedTurn(events)):
        pass
    assert sent == (yielded if tracing else [])
