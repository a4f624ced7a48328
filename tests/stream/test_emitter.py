"""UnifiedEmitter.yield_turn (reference K.110-111): passthrough, spans on the side."""

from collections.abc import AsyncIterator

import pytest

from tether.stream import (
    CloseSpan,
    HarnessTurn,
    OpenSpan,
    SpanSignal,
    StreamEvent,
    StreamTaskMessageFull,
    ToolRequestContent,
    ToolResponseContent,
    TurnUsage,
    UnifiedEmitter,
)

REQUEST = ToolRequestContent(author="agent", name="clock", tool_call_id="c", arguments={})
RESPONSE = ToolResponseContent(author="agent", name="clock", tool_call_id="c", content="noon")


class ListTurn:
    def __init__(self, events: list[StreamEvent]) -> None:
        self._events = events
        self._usage = TurnUsage()
        self.closed = False

    @property
    def events(self) -> AsyncIterator[StreamEvent]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[StreamEvent]:
        try:
            for event in self._events:
                yield event
            self._usage = TurnUsage(num_tool_calls=1)
        finally:
            self.closed = True

    def usage(self) -> TurnUsage:
        return self._usage


EVENTS: list[StreamEvent] = [
    StreamTaskMessageFull(content=REQUEST, index=0),
    StreamTaskMessageFull(content=RESPONSE, index=1),
]


async def test_events_pass_through_and_spans_go_to_the_tracer_first() -> None:
    seen: list[object] = []

    async def tracer(signal: SpanSignal) -> None:
        seen.append(signal)

    turn = ListTurn(EVENTS)
    assert isinstance(turn, HarnessTurn)
    async for event in UnifiedEmitter(tracer=tracer).yield_turn(turn):
        seen.append(event)
    assert seen == [OpenSpan("c", "tool", "clock"), EVENTS[0], CloseSpan("c", "noon"), EVENTS[1]]
    assert turn.usage().num_tool_calls == 1  # read after exhaustion


async def test_without_a_tracer_it_is_a_pure_passthrough() -> None:
    assert [e async for e in UnifiedEmitter().yield_turn(ListTurn(EVENTS))] == EVENTS


async def test_stopping_early_flushes_open_spans_and_closes_the_source() -> None:
    signals: list[SpanSignal] = []
    turn = ListTurn(EVENTS)
    stream = UnifiedEmitter(tracer=signals.append).yield_turn(turn)
    async for _ in stream:
        break
    await stream.aclose()
    assert turn.closed
    assert signals == [OpenSpan("c", "tool", "clock"), CloseSpan("c", None, is_complete=False)]


async def test_a_failing_tracer_never_stops_delivery(caplog: pytest.LogCaptureFixture) -> None:
    def broken(signal: SpanSignal) -> None:
        raise RuntimeError("backend down")

    delivered = [e async for e in UnifiedEmitter(tracer=broken).yield_turn(ListTurn(EVENTS))]
    assert delivered == EVENTS
    assert "span tracer failed" in caplog.text
