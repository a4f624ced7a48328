"""Every Python example of docs/pydantic-ai.md, run as written on pydantic-ai's OpenAI models
over HTTP to the fake OpenAI API (issue 36 item 3): the page's ``"openai:gpt-4o"`` agent is
pydantic-ai's ``OpenAIResponsesModel`` on ``$OPENAI_BASE_URL``, the tap's agent an
``OpenAIChatModel`` with ``OpenAIProvider(base_url=...)``. Each settles with the expected
answer, its model calls are the requests the fake counted, and a durable run replays offline
with none."""

from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.integrations.pydantic_ai import PydanticAIHarness, durable
from tether.store import Store

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ..cuts import replay_sends_nothing
from ..doc_examples import LOOKUP, Page, Shop, TapReader, memory_only, run_example, serve_the_shop

Make = Callable[..., Runtime]
PAGE = Page("pydantic-ai.md")
TAP = "PydanticAITurn(agent.run_stream_events("
ADAPTER = "# myapp.py"
DRIVES = "async def by_node("
OWN_HARNESS = "class Support:"
REPLAY = "journal.replay(PydanticAIHarness(support))"
MCP = "toolsets=[toolset]"


def test_every_python_example_of_the_page_is_run_by_a_test() -> None:
    assert PAGE.unclaimed([TAP, ADAPTER, DRIVES, OWN_HARNESS, REPLAY, MCP]) == []


async def adapter_example(shop: Shop) -> dict[str, Any]:
    namespace: dict[str, Any] = {"shop": shop}
    await run_example(PAGE.example(ADAPTER), namespace, "myapp")
    return namespace


async def ask(runtime: Runtime, agent: str, text: str) -> tuple[str, Any]:
    receipt = await runtime.dispatch(agent, "acme", text)
    return receipt.conversation_id, (await settle(runtime, receipt.submission_id))["result"]


async def test_the_tap_example_streams_a_run_on_openai_chat(
    fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.add(Answer(calls=(Call("add", {"a": 1, "b": 2}),)), Answer(text="1 + 2 is 3."))
    provider = OpenAIProvider(base_url=fake.url, api_key="fake")
    agent = Agent(OpenAIChatModel("gpt-4o", provider=provider))

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    reader = TapReader()
    namespace = {"agent": agent, **reader.names()}
    await run_example(PAGE.example(TAP), namespace)
    assert fake.count == 2 and fake.requests[0].path == "/v1/chat/completions"
    assert reader.contents(whole_only=True) == ["tool_response"]
    assert reader.text() == "1 + 2 is 3."
    printed = capsys.readouterr().out
    assert "input_tokens=240" in printed and "output_tokens=60" in printed, printed
    assert reader.signals  # the tool call's span


async def test_the_adapter_example_journals_its_tools_and_its_approval(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    shop = Shop()
    namespace = await adapter_example(shop)
    conversation_id = await serve_the_shop(make_runtime, store, fake, namespace["agents"](), shop)

    # The page's replay example, on this session: zero model and tool calls.
    sent = fake.count
    replay = {**namespace, "store": store, "conversation_id": conversation_id}
    await run_example(PAGE.example(REPLAY), replay)
    assert replay["outputs"] == ["Order 42 shipped.", "Refunded."]
    assert fake.count == sent and shop.refunds == [("42", 5.0)]


@memory_only
@pytest.mark.parametrize("drive", ["stream", "by_node"])
async def test_the_drive_examples_are_journaled_alike(
    make_runtime: Make, store: Store, fake: FakeOpenAI, drive: str
) -> None:
    namespace = await adapter_example(Shop())
    await run_example(PAGE.example(DRIVES), namespace, "myapp")
    agents = namespace["agents"]()  # the page's: drive=stream
    if drive == "by_node":
        agents = {"support": durable(namespace["support"], drive=namespace["by_node"])}
    fake.add(*LOOKUP)
    async with make_runtime(agents) as runtime:
        conversation_id, result = await ask(runtime, "support", "where is order 42?")
    assert result == "Order 42 shipped."
    assert fake.count == 2 and all(r.stream for r in fake.requests)
    harness = PydanticAIHarness(namespace["support"], drive=namespace[drive])
    assert await replay_sends_nothing(store, fake, conversation_id, harness) == [result]


@memory_only
async def test_the_harness_of_ones_own_is_journaled(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    namespace = await adapter_example(Shop())
    await run_example(PAGE.example(OWN_HARNESS), namespace, "myapp")
    support = namespace["Support"]
    spec = AgentSpec(harness=support())
    fake.add(*LOOKUP)
    async with make_runtime({"support": AgentDefinition(lambda i, e: spec)}) as runtime:
        conversation_id, result = await ask(runtime, "support", "where is order 42?")
    assert result == "Order 42 shipped." and fake.count == 2
    assert await replay_sends_nothing(store, fake, conversation_id, support()) == [result]
