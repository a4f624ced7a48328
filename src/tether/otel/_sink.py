"""Span signals → OpenTelemetry spans, named and attributed per the GenAI conventions."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from tether._canonical import canonical_json
from tether.otel._engine import tool_attributes
from tether.stream import CloseSpan, OpenSpan, SpanSignal

__all__ = ("OtelSpanSink",)

_INSTRUMENTATION = "tether"


class OtelSpanSink:
    """A span sink for ``UnifiedEmitter(tracer=...)`` that opens and ends OpenTelemetry spans.

    Tool spans are ``execute_tool {name}`` with ``gen_ai.operation.name``, ``gen_ai.tool.name``
    and ``gen_ai.tool.call.id``; arguments and results are attached only with
    ``record_content=True`` (they may hold personal data). Reasoning blocks are ``reasoning``
    spans. A span closed as incomplete (the stream stopped first) ends with an error status.

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
        self.tracer = tracer or trace.get_tracer(_INSTRUMENTATION)
        self.parent = parent
        self.record_content = record_content
        self._open: dict[str, Span] = {}

    def __call__(self, signal: SpanSignal) -> None:
        if isinstance(signal, OpenSpan):
            self._start(signal)
        else:
            self._end(signal)

    def _start(self, signal: OpenSpan) -> None:
        earlier = self._open.pop(signal.key, None)
        if earlier is not None:  # opened twice: end the first rather than leak it
            earlier.set_attribute("tether.span.complete", False)
            earlier.end()
        if signal.kind == "tool":
            name = f"execute_tool {signal.name}"
            attributes = tool_attributes(signal.name, signal.key)
            if self.record_content:
                attributes["gen_ai.tool.call.arguments"] = _text(signal.input)
        else:
            name, attributes = signal.kind, {"tether.span.kind": signal.kind}
        span = self.tracer.start_span(name, context=self.parent, attributes=attributes)
        self._open[signal.key] = span

    def _end(self, signal: CloseSpan) -> None:
        span = self._open.pop(signal.key, None)
        if span is None:
            return
        if self.record_content and signal.output is not None:
            span.set_attribute("gen_ai.tool.call.result", _text(signal.output))
        if not signal.is_complete:
            span.set_attribute("tether.span.complete", False)
            span.set_status(Status(StatusCode.ERROR, "the stream stopped before it finished"))
        elif signal.is_error:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        span.end()


def _text(value: object) -> str:
    return value if isinstance(value, str) else canonical_json(value).decode()
