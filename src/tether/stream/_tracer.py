"""Span signals → OpenTelemetry spans, named and attributed per the GenAI conventions: the
tracer ``UnifiedEmitter`` makes by default for a trace id (agentex's ``SpanTracer``).

OpenTelemetry is the ``otel`` extra: it is imported when a tracer is made, never by ``import
tether``; ``tether.otel.OtelSpanSink`` is this tracer given an OpenTelemetry tracer and parent.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from tether._canonical import canonical_json
from tether._extras import install_hint
from tether.stream._spans import CloseSpan, OpenSpan, SpanSignal

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

__all__ = ("SpanTracer", "tool_attributes")

_INSTRUMENTATION = "tether"
_HEX = re.compile(r"[0-9a-f]+")


def tool_attributes(name: str, call_id: str) -> dict[str, str]:
    """The GenAI semantic-convention attributes of an ``execute_tool {name}`` span."""
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }


class SpanTracer:
    """A span sink that opens and ends OpenTelemetry spans: what ``UnifiedEmitter(trace_id=...)``
    traces with unless given another ``tracer``.

    Tool spans are ``execute_tool {name}`` with ``gen_ai.operation.name``, ``gen_ai.tool.name``
    and ``gen_ai.tool.call.id``; arguments and results are attached only with
    ``record_content=True`` (they may hold personal data). Reasoning blocks are ``reasoning``
    spans. A span closed as incomplete (the stream stopped first) ends with an error status.
    Each span carries ``tether.task.id`` when a ``task_id`` is given.

    The spans are children of ``parent`` (an OpenTelemetry context) if given, else of the span
    ``parent_span_id`` in the trace ``trace_id`` (W3C hex ids, 32 and 16 digits; any other
    string stands for the ids derived from it, the same every time), else of the current span.
    ``tracer`` defaults to the global provider's.

    Example::

        emitter = UnifiedEmitter(task_id=task, trace_id=trace, parent_span_id=turn_span)
        # the same as UnifiedEmitter(tracer=SpanTracer(trace, turn_span, task))
    """

    def __init__(
        self,
        trace_id: str | None = None,
        parent_span_id: str | None = None,
        task_id: str | None = None,
        *,
        tracer: Tracer | None = None,
        parent: Context | None = None,
        record_content: bool = False,
    ) -> None:
        try:
            from opentelemetry import trace
        except ImportError as exc:  # pragma: no cover - the otel extra is missing
            raise ImportError(f"tracing needs OpenTelemetry: {install_hint('otel')}") from exc
        self.tracer = tracer or trace.get_tracer(_INSTRUMENTATION)
        self.parent = (
            parent if parent is not None or not trace_id else _remote(trace_id, parent_span_id)
        )
        self.task_id = task_id
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
        if self.task_id is not None:
            attributes["tether.task.id"] = self.task_id
        span = self.tracer.start_span(name, context=self.parent, attributes=attributes)
        self._open[signal.key] = span

    def _end(self, signal: CloseSpan) -> None:
        from opentelemetry.trace import Status, StatusCode

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


def _remote(trace_id: str, parent_span_id: str | None) -> Context:
    """A context whose current span is the remote ``parent_span_id`` of trace ``trace_id``."""
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    span_id = _id(parent_span_id, 16, trace_id) if parent_span_id else _id(trace_id, 16, "span")
    parent = SpanContext(
        _id(trace_id, 32, "trace"),
        span_id,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))


def _id(value: str, digits: int, salt: str) -> int:
    """``value`` as an id of ``digits`` hex digits: itself if it is one, else derived from it."""
    text = value.lower()
    if len(text) == digits and _HEX.fullmatch(text) and int(text, 16):
        return int(text, 16)
    digest = hashlib.sha256(f"tether.{salt}\x00{value}".encode()).digest()
    return int.from_bytes(digest[: digits // 2], "big") or 1  # all zeros is invalid


def _text(value: object) -> str:
    return value if isinstance(value, str) else canonical_json(value).decode()
