"""One spelling in the spans whichever framework called the model: the built-in agent,
pydantic-ai, LangGraph and OpenAI Agents (Responses and Chat Completions), each on a real
OpenAI client against the fake OpenAI API, trace their model calls alike: ``chat gpt-4.1-mini``,
kind CLIENT, ``gen_ai.provider.name=openai``, the response's model and id, and finish reasons
``tool_call`` then ``stop`` (though the journal keeps ``openai-chat:gpt-4.1-mini`` from one,
``tool_calls`` from another)."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import OpenAIChatCompletionsModel, function_tool
from langchain_core.tools import tool as lc_tool
from openai import AsyncOpenAI
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from pydantic_ai import Agent as PydanticAgent

from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.integrations import langgraph, openai_agents, pydantic_ai
from tether.models.pydantic_ai import PydanticAIModel
from tether.otel import OtelInterceptor

from ..engine.test_runtime import settle
from ..fakes.openai_server import Answer, Call, FakeOpenAI
from ..integrations.langgraph.app import build, chat_openai

Make = Callable[..., Runtime]
MODEL = "gpt-4.1-mini"


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def builtin() -> AgentDefinition:
    name = f"openai-chat:{MODEL}"  # journaled as pydantic-ai names it
    return AgentDefinition(
        lambda instance, env: agent_spec(PydanticAIModel(name), model_name=name, tools=[lookup])
    )


def pydantic_ai_agent() -> AgentDefinition:
    agent = PydanticAgent(f"openai-chat:{MODEL}", name="agent")

    @agent.tool_plain
    async def lookup(topic: str) -> str:
        return f"facts about {topic}"

    return pydantic_ai.durable(agent)


def langgraph_agent() -> AgentDefinition:
    @lc_tool
    async def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"facts about {topic}"

    return langgraph.durable(build, model=chat_openai(), tools=[lookup], name="react")


def openai_agents_agent(chat: bool) -> Callable[[], AgentDefinition]:
    def make() -> AgentDefinition:
        @function_tool
        async def lookup(topic: str) -> str:
            """Look a topic up."""
            return f"facts about {topic}"

        model: Any = OpenAIChatCompletionsModel(MODEL, AsyncOpenAI()) if chat else f"openai/{MODEL}"
        return openai_agents.durable(SdkAgent(name="agent", model=model, tools=[lookup]))

    return make


FRAMEWORKS: dict[str, tuple[Callable[[], AgentDefinition], str | None]] = {
    # the framework, and the prefix of the response ids it reports (None: none)
    "tether": (builtin, "chatcmpl-"),
    "pydantic-ai": (pydantic_ai_agent, "chatcmpl-"),
    "langgraph": (langgraph_agent, None),  # ChatOpenAI's stream drops it (lc_run-… ids)
    "openai-agents-responses": (openai_agents_agent(chat=False), "resp_"),
    "openai-agents-chat": (openai_agents_agent(chat=True), None),  # the SDK drops its id
}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "fake")
        yield server


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
async def test_model_calls_are_spelled_alike_in_every_framework(
    framework: str, fake: FakeOpenAI, make_runtime: Make
) -> None:
    make, ids = FRAMEWORKS[framework]
    fake.add(Answer(calls=(Call("lookup", {"topic": "tides"}),)), Answer(text="Tides turn."))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = OtelInterceptor(provider.get_tracer("test"))
    async with make_runtime({"agent": make()}, interceptors=[interceptor]) as runtime:
        receipt = await runtime.dispatch("agent", "me", "look tides up")
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
    assert fake.count == 2
    spans = exporter.get_finished_spans()
    chats: list[ReadableSpan] = sorted(
        (s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_time or 0
    )
    assert [s.name for s in chats] == [f"chat {MODEL}"] * 2
    assert [s.kind for s in chats] == [SpanKind.CLIENT] * 2
    [attempt] = [s for s in spans if s.name == "invoke_agent agent"]
    assert len([s for s in spans if s.name == "execute_tool lookup"]) == 1
    reasons = []
    for span in chats:
        attributes = dict(span.attributes or {})
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == MODEL
        assert attributes["gen_ai.response.model"] == MODEL
        assert attributes["gen_ai.conversation.id"] == receipt.conversation_id
        response_id = attributes.get("gen_ai.response.id")
        assert response_id is None if ids is None else str(response_id).startswith(ids)
        reasons.append(attributes["gen_ai.response.finish_reasons"])
        assert span.context.trace_id == attempt.context.trace_id
    assert reasons == [("tool_call",), ("stop",)]
