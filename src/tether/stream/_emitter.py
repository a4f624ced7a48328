"""Delivering a framework turn, with spans derived on the side: its events passed on, or
written into the durable log (that writing is :mod:`._auto_send`'s)."""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from tether.stream._auto_send import auto_send
from tether.stream._spans import SpanDeriver, SpanSignal
from tether.stream._tracer import SpanTracer
from tether.stream._turn import HarnessTurn, TurnResult
from tether.stream._types import StreamEvent

if TYPE_CHECKING:  # only the writer, _auto_send, uses the journal
    from tether.journal import Turn

__all__ = ("SpanSink", "UnifiedEmitter")

logger = logging.getLogger("tether.stream")

SpanSink = Callable[[SpanSignal], Awaitable[None] | None]
"""Receives span signals (a tracer); its failures are logged and never stop delivery."""


class UnifiedEmitter:
    """Delivers turns from any framework tap in the canonical stream, deriving spans.

    Constructed as agentex's: ``task_id``, ``trace_id`` and ``parent_span_id`` are the
    turn's context, and ``tracer`` says where spans go: ``None`` (the default) a
    :class:`SpanTracer` of ``trace_id`` under ``parent_span_id`` if there is a ``trace_id``
    (OpenTelemetry spans, the ``otel`` extra), else no tracing; ``False`` no tracing
    whatever the ids; ``True`` a :class:`SpanTracer` even without a ``trace_id`` (under the
    current span); any other span sink (a callable taking each signal) as given.

    Example::

        emitter = UnifiedEmitter(task_id=task, trace_id=trace, parent_span_id=turn_span)
        async for event in emitter.yield_turn(turn):
            await send(event)
        usage = turn.usage()  # valid once the events are exhausted

        UnifiedEmitter(tracer=my_sink)  # spans to a sink of one's own
        UnifiedEmitter()                # no tracing
    """

    def __init__(
        self,
        task_id: str | None = None,
        trace_id: str | None = None,
        parent_span_id: str | None = None,
        *,
        tracer: SpanSink | bool | None = None,
    ) -> None:
        self.task_id = task_id
        self.trace_id = trace_id
        self.parent_span_id = parent_span_id
        self.tracer: SpanSink | None
        if tracer is False or (tracer is None and not trace_id):
            self.tracer = None
        elif tracer is None or tracer is True:
            self.tracer = SpanTracer(trace_id, parent_span_id, task_id)
        else:
            self.tracer = tracer

    async def yield_turn(self, turn: HarnessTurn) -> AsyncGenerator[StreamEvent, None]:
        """Each event unchanged and in order; its spans are handled before it is yielded.
        Open spans are flushed (as incomplete) however the iteration ends."""
        async with contextlib.aclosing(self.yield_events(turn.events)) as events:
            async for event in events:
                yield event

    async def yield_events(
        self, source: AsyncIterator[StreamEvent]
    ) -> AsyncGenerator[StreamEvent, None]:
        """As ``yield_turn``, over bare events. The source is closed when this stops."""
        deriver = SpanDeriver() if self.tracer is not None else None
        try:
            async for event in source:
                if deriver is not None:
                    for signal in deriver.observe(event):
                        await self._trace(signal)
                yield event
        finally:
            if isinstance(source, AsyncGenerator):
                await source.aclose()  # a consumer that stops early must not leak the source
            for signal in deriver.flush() if deriver is not None else ():
                await self._trace(signal)

    async def auto_send_turn(self, turn: HarnessTurn, journal: Turn) -> TurnResult:
        """Write a framework turn into the durable log through ``journal`` (the turn of the
        running execution): messages as journaled completions that stream as delta records,
        tool responses as reported outcomes, then the usage, read after exhaustion.

        The log shows the turn on SSE and keeps it across restarts; a replay serves it from
        the log without pulling ``turn.events``. Spans are derived as ``yield_turn`` does.

        Example::

            async def run(self, turn):          # a Tether harness
                tapped = PydanticAITurn(agent.run_stream_events(turn.inputs[-1].text))
                return (await UnifiedEmitter().auto_send_turn(tapped, turn)).final_text
        """
        deriver = SpanDeriver() if self.tracer is not None else None

        async def trace(event: StreamEvent) -> None:
            for signal in deriver.observe(event) if deriver is not None else ():
                await self._trace(signal)

        try:
            return await auto_send(turn, journal, trace)
        finally:
            for signal in deriver.flush() if deriver is not None else ():
                await self._trace(signal)

    async def _trace(self, signal: SpanSignal) -> None:
        assert self.tracer is not None
        try:
            outcome = self.tracer(signal)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.warning("span tracer failed on %r; delivery goes on", signal, exc_info=True)
