"""Engine work as OpenTelemetry spans, captured with the SDK's in-memory exporter."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tether.demo import demo_agents, demo_subagents
from tether.models import Failure, ScriptedModel
from tether.otel import OtelInterceptor

from ..engine.agents import echo_agent
from .test_otlp import derived as derived_hex

Make = Callable[..., Any]


def derived(submission_id: str) -> tuple[int, int]:
    trace_id, span_id = derived_hex(submission_id)
    return int(trace_id, 16), int(span_id, 16)


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.05")


async def test_an_agent_run_is_a_tree_of_genai_spans(make_runtime: Make) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = OtelInterceptor(provider.get_tracer("test"))
    async with make_runtime(demo_agents(), interceptors=[interceptor]) as runtime:
        receipt = await runtime.dispatch("assistant", "me", "research tides")
        async with asyncio.timeout(60):
            await runtime.wait(receipt.submission_id)
    spans = exporter.get_finished_spans()
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    [agent] = by_name["invoke_agent assistant"]
    [execution] = [
        s for name, group in by_name.items() if name.startswith("execution") for s in group
    ]
    chats = by_name["chat echo"]
    [tool] = by_name["execute_tool research"]
    assert len(chats) == 2  # ask for the tool, then answer with its result
    # No caller trace: the submission's own, whose root is derived from its id.
    trace_id, parent_id = derived(receipt.submission_id)
    assert agent.parent is not None and agent.parent.is_remote
    assert (agent.context.trace_id, agent.parent.span_id) == (trace_id, parent_id)
    assert {s.kind for s in chats} == {SpanKind.CLIENT}
    assert {s.kind for s in (agent, execution, tool)} == {SpanKind.INTERNAL}
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    assert execution.parent is not None and execution.parent.span_id == agent.context.span_id
    for child in [*chats, tool]:
        assert child.parent is not None and child.parent.span_id == execution.context.span_id
        assert child.context.trace_id == agent.context.trace_id
    attributes = dict(tool.attributes or {})
    assert attributes["gen_ai.tool.name"] == "research"
    assert attributes["tether.submission_id"] == receipt.submission_id
    assert dict(chats[0].attributes or {})["gen_ai.operation.name"] == "chat"


TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"


@pytest.mark.parametrize(
    ("traceparent", "joined"),
    [(f"00-{TRACE_ID}-{PARENT_ID}-01", True), ("00-not-a-trace-01", False)],
)
async def test_an_attempt_joins_the_trace_it_was_dispatched_with(
    make_runtime: Make, traceparent: str, joined: bool
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = OtelInterceptor(provider.get_tracer("test"))
    async with make_runtime(demo_agents(), interceptors=[interceptor]) as runtime:
        receipt = await runtime.dispatch(
            "assistant", "me", "hello", trace={"traceparent": traceparent}
        )
        async with asyncio.timeout(60):
            assert (await runtime.wait(receipt.submission_id))["status"] == "succeeded"
        stored = await runtime.submission(receipt.submission_id)
    assert (stored.submission.trace is not None) is joined  # a malformed context is dropped
    [agent] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent assistant"]
    assert agent.parent is not None
    if joined:
        assert f"{agent.parent.span_id:016x}" == PARENT_ID
        assert f"{agent.context.trace_id:032x}" == TRACE_ID
    else:  # the submission's own trace
        trace_id, parent_id = derived(receipt.submission_id)
        assert (agent.context.trace_id, agent.parent.span_id) == (trace_id, parent_id)


async def test_a_childs_spans_join_its_parents_trace(make_runtime: Make) -> None:
    """No caller trace: the child's attempts are still in the parent's trace, under the
    ``execute_tool task`` span of the call that spawned it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = OtelInterceptor(provider.get_tracer("test"))
    async with make_runtime(
        demo_agents(), interceptors=[interceptor], subagents=demo_subagents()
    ) as runtime:
        receipt = await runtime.dispatch("assistant", "me", "ask the researcher about tides")
        async with asyncio.timeout(60):
            await runtime.wait(receipt.submission_id)
    spans = exporter.get_finished_spans()
    parents = [s for s in spans if s.name == "invoke_agent assistant"]
    [task] = [s for s in spans if s.name == "execute_tool task"]
    [child] = [s for s in spans if s.name == "invoke_agent researcher"]
    assert len(parents) == 2  # it parked for the child, then resumed
    assert parents[0].context.trace_id == parents[1].context.trace_id == task.context.trace_id
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    [(event, attributes)] = [(e.name, dict(e.attributes or {})) for e in parents[0].events]
    assert event == "tether.parked"
    assert attributes["tether.parked.reason"] == "children"
    assert attributes["tether.task.call_ids"] == (
        dict(task.attributes or {})["gen_ai.tool.call.id"],
    )
    assert not parents[1].events
    assert child.context.trace_id == task.context.trace_id
    assert child.parent is not None and child.parent.span_id == task.context.span_id
    assert dict(task.attributes or {})["gen_ai.tool.name"] == "task"


async def test_a_failing_model_call_is_an_error_of_its_type(make_runtime: Make) -> None:
    """Not a park: the model call, the execution and the attempt end ERROR, with the
    exception and its class as ``error.type``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = OtelInterceptor(provider.get_tracer("test"))
    model = ScriptedModel(lambda request: Failure("fatal", "no such model"))
    async with make_runtime({"echo": echo_agent(model)}, interceptors=[interceptor]) as runtime:
        receipt = await runtime.dispatch("echo", "me", "hello")
        async with asyncio.timeout(60):
            assert (await runtime.wait(receipt.submission_id))["status"] == "failed"
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent echo", "execution exec", "chat test"}
    for span in spans.values():
        assert span.status.status_code is StatusCode.ERROR, span.name
        assert dict(span.attributes or {})["error.type"] == "ModelFatalError"
        assert [event.name for event in span.events] == ["exception"]
