"""A durable adapter's model and tool calls are traced like any engine work: the journal
wraps the framework's own calls with the host's interceptors."""

from collections.abc import Callable

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether.engine import AgentDefinition, Runtime
from tether.otel import OtelInterceptor

from ..engine.test_runtime import settle
from .langgraph import app as langgraph_app
from .openai_agents import app as openai_agents_app
from .pydantic_ai import app as pydantic_ai_app

APPS: dict[str, tuple[Callable[[], dict[str, AgentDefinition]], str, str]] = {
    "pydantic-ai": (pydantic_ai_app.agents, "research tides", "research"),
    "langgraph": (langgraph_app.agents, "tides", "lookup"),
    "openai-agents": (openai_agents_app.agents, "weather Oslo", "get_weather"),
}


@pytest.mark.parametrize("framework", sorted(APPS))
async def test_adapter_calls_become_chat_and_tool_spans_under_the_attempt(
    framework: str, make_runtime: Callable[..., Runtime]
) -> None:
    agents, prompt, tool = APPS[framework]
    definitions = agents()
    [agent] = definitions
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = OtelInterceptor(provider.get_tracer("test"))
    async with make_runtime(definitions, interceptors=[interceptor]) as runtime:
        receipt = await runtime.dispatch(agent, "me", prompt)
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
    spans = exporter.get_finished_spans()
    [attempt] = [s for s in spans if s.name == f"invoke_agent {agent}"]
    chats = [s for s in spans if s.name.startswith("chat ")]
    [tool_span] = [s for s in spans if s.name == f"execute_tool {tool}"]
    assert len(chats) == 2
    for span in [*chats, tool_span]:
        assert span.context.trace_id == attempt.context.trace_id
        assert span.parent is not None
    assert dict(tool_span.attributes or {})["tether.submission_id"] == receipt.submission_id
