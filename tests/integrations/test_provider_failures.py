"""A provider that fails, under each durable adapter: the framework's own model call reaches
the turn's model effect, so Tether's retry policy covers it, and what the framework's SDK
raised settles typed (``provider_rate_limited`` and the status). Where Tether turns the SDK's
own retries off (pydantic-ai, the OpenAI Agents SDK), a provider that rate-limits forever
gets exactly ``retries + 1`` requests. The fake OpenAI API answers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from agents import Agent as SdkAgent
from pydantic import JsonValue
from pydantic_ai.models import infer_model

from tether.engine import AgentDefinition, Runtime
from tether.integrations.langgraph import durable as langgraph_durable
from tether.integrations.openai_agents import durable as openai_agents_durable
from tether.integrations.pydantic_ai import durable as pydantic_ai_durable
from tether.models import ModelRetryPolicy

from ..engine.test_runtime import settle
from ..fakes.openai_server import Answer, FakeOpenAI
from .langgraph.app import build, chat_openai, lookup
from .pydantic_ai.app import make_agent

Make = Callable[..., Runtime]
RETRIES = 2
RATE_LIMITED = Answer(status=429, retry_after="0")  # no wait: the retries come at once


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-integrations")
        yield server


async def settled_by(make_runtime: Make, definition: AgentDefinition) -> dict[str, JsonValue]:
    retry = ModelRetryPolicy(retries=RETRIES)
    async with make_runtime({"agent": definition}, model_retry=retry) as runtime:
        receipt = await runtime.dispatch("agent", "me", "look up tides")
        return await settle(runtime, receipt.submission_id)


def pydantic_ai_agent() -> AgentDefinition:
    return pydantic_ai_durable(make_agent(infer_model("openai-chat:gpt-4.1-mini")))


def openai_agents_agent() -> AgentDefinition:
    return openai_agents_durable(SdkAgent(name="helper", model="gpt-4.1-mini"), name="agent")


@pytest.mark.parametrize(
    "definition", [pydantic_ai_agent, openai_agents_agent], ids=["pydantic-ai", "openai-agents"]
)
@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_a_rate_limit_forever_gets_the_budget_and_no_sdk_retries(
    make_runtime: Make, fake: FakeOpenAI, definition: Callable[[], AgentDefinition]
) -> None:
    fake.add(*[RATE_LIMITED] * 10)
    settled = await settled_by(make_runtime, definition())
    assert fake.count == RETRIES + 1
    assert settled["errorCode"] == "provider_rate_limited"
    assert settled["errorDetails"] == {"status": 429, "tries": RETRIES + 1}


@pytest.mark.parametrize("store", ["memory"], indirect=True)
async def test_a_langchain_models_sdk_error_settles_typed(
    make_runtime: Make, fake: FakeOpenAI
) -> None:
    """A refused request is not retried (by Tether or the SDK); the openai SDK's error,
    raised through LangChain and LangGraph, is read for its status."""
    fake.add(Answer(status=400))
    definition = langgraph_durable(build, model=chat_openai(), tools=[lookup], name="agent")
    settled = await settled_by(make_runtime, definition)
    assert fake.count == 1
    assert settled["errorCode"] == "provider_error"
    assert settled["errorDetails"] == {"status": 400, "tries": 1}
