"""Span signals → OpenTelemetry spans, for an OpenTelemetry tracer and parent of one's own."""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.trace import Tracer

from tether.stream import SpanTracer

__all__ = ("OtelSpanSink",)


class OtelSpanSink(SpanTracer):
    """A span sink for ``UnifiedEmitter(tracer=...)`` that opens and ends OpenTelemetry spans
    with ``tracer`` under ``parent`` (the current span if ``None``): a
    :class:`~tether.stream.SpanTracer`, which ``UnifiedEmitter(trace_id=...)`` makes by
    itself; this one is made from OpenTelemetry's own objects.

    Example::

        sink = OtelSpanSink(trace.get_tracer("my-app"), parent=context)
        async for event in UnifiedEmitter(tracer=sink).yield_turn(turn): ...
    """

    def __init__(
        self,
        tracer: Tracer | None = None,
        *,
        parent: Context | None = None,
        record_content: bool = False,
    ) -> None:
        super().__init__(tracer=tracer, parent=parent, record_content=record_content)
