"""Span signals exported through the OpenTelemetry SDK's in-memory exporter."""

from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode, set_span_in_context

from tether.otel import OtelSpanSink
from tether.stream import (
    CloseSpan,
    OpenSpan,
    SpanTracer,
    StreamEvent,
    StreamTaskMessageFull,
    ToolRequestContent,
    ToolResponseContent,
    TurnUsage,
    UnifiedEmitter,
)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def sink_for(exporter: InMemorySpanExporter, **options: object) -> tuple[OtelSpanSink, object]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    root = tracer.start_span("submission")
    sink = OtelSpanSink(tracer, parent=set_span_in_context(root), **options)  # type: ignore[arg-type]
    return sink, root


def test_tool_spans_follow_the_genai_conventions(exporter: InMemorySpanExporter) -> None:
    sink, root = sink_for(exporter, record_content=True)
    sink(OpenSpan("c1", "tool", "clock", {"tz": "UTC"}))
    sink(CloseSpan("c1", "noon", is_complete=True, is_error=False))
    [span] = exporter.get_finished_spans()
    assert span.name == "execute_tool clock"
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "clock",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": '{"tz":"UTC"}',
        "gen_ai.tool.call.result": "noon",
    }
    assert span.parent is not None
    assert span.parent.span_id == root.get_span_context().span_id  # type: ignore[attr-defined]
    assert span.status.status_code is StatusCode.UNSET


def test_content_is_left_out_unless_asked(exporter: InMemorySpanExporter) -> None:
    sink, _ = sink_for(exporter)
    sink(OpenSpan("c1", "tool", "send_email", {"to": "bob@example.com"}))
    sink(CloseSpan("c1", "sent"))
    [span] = exporter.get_finished_spans()
    assert "gen_ai.tool.call.arguments" not in (span.attributes or {})
    assert "gen_ai.tool.call.result" not in (span.attributes or {})


def test_errors_incomplete_reasoning_duplicates_and_orphans(
    exporter: InMemorySpanExporter,
) -> None:
    sink, _ = sink_for(exporter)
    sink(OpenSpan("bad", "tool", "boom"))
    sink(CloseSpan("bad", "failed", is_error=True))
    sink(OpenSpan("cut", "tool", "slow"))
    sink(CloseSpan("cut", None, is_complete=False))
    sink(OpenSpan("reasoning:3", "reasoning", "reasoning"))
    sink(CloseSpan("reasoning:3", "thought"))
    sink(OpenSpan("twice", "tool", "t"))
    sink(OpenSpan("twice", "tool", "t"))
    sink(CloseSpan("twice", "ok"))
    sink(CloseSpan("never-opened", "x"))
    finished = exporter.get_finished_spans()
    spans = {(s.name, dict(s.attributes or {}).get("tether.span.complete")): s for s in finished}
    assert len(exporter.get_finished_spans()) == 5
    assert spans[("execute_tool boom", None)].status.status_code is StatusCode.ERROR
    assert spans[("execute_tool slow", False)].status.status_code is StatusCode.ERROR
    assert dict(spans[("reasoning", None)].attributes or {})["tether.span.kind"] == "reasoning"
    assert ("execute_tool t", False) in spans and ("execute_tool t", None) in spans


async def test_the_emitters_default_tracer_is_the_trace_given_as_agentexs_is(
    exporter: InMemorySpanExporter,
) -> None:
    """``UnifiedEmitter(task_id, trace_id, parent_span_id)``, agentex's signature: spans go
    under that parent in that trace, with the task's id; ``tracer=False`` turns them off."""
    trace_id, parent_span_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    emitter = UnifiedEmitter("task-1", trace_id, parent_span_id)
    assert (emitter.task_id, emitter.trace_id, emitter.parent_span_id) == (
        "task-1",
        trace_id,
        parent_span_id,
    )
    assert isinstance(emitter.tracer, SpanTracer)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    emitter.tracer.tracer = provider.get_tracer("test")
    request = ToolRequestContent(author="agent", name="clock", tool_call_id="c1", arguments={})
    response = ToolResponseContent(author="agent", name="clock", tool_call_id="c1", content="noon")
    events: list[StreamEvent] = [
        StreamTaskMessageFull(index=0, content=request),
        StreamTaskMessageFull(index=1, content=response),
    ]
    turn = _Listed(events)
    assert [e async for e in emitter.yield_turn(turn)] == events
    [span] = exporter.get_finished_spans()
    assert span.name == "execute_tool clock"
    assert f"{span.context.trace_id:032x}" == trace_id
    assert span.parent is not None and f"{span.parent.span_id:016x}" == parent_span_id
    assert dict(span.attributes or {})["tether.task.id"] == "task-1"
    # A task id as the trace id (as agentex's examples pass it) stands for ids derived from it.
    derived = UnifiedEmitter("task-1", "task-1", None).tracer
    assert isinstance(derived, SpanTracer) and derived.parent is not None
    assert UnifiedEmitter("task-1", trace_id, parent_span_id, tracer=False).tracer is None
    assert UnifiedEmitter("task-1").tracer is None  # no trace id: no tracing
    assert UnifiedEmitter(tracer=True).tracer is not None  # under the current span


class _Listed:
    def __init__(self, events: list[StreamEvent]) -> None:
        self._events = events

    @property
    def events(self) -> AsyncIterator[StreamEvent]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[StreamEvent]:
        for event in self._events:
            yield event

    def usage(self) -> TurnUsage:
        return TurnUsage()
