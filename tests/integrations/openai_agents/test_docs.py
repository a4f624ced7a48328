"""Every Python example of docs/openai-agents.md, run as written on the SDK's OpenAI models over
HTTP to the fake OpenAI API (issue 36 item 3): the page's agents named ``"gpt-4.1"`` are the
SDK's ``OpenAIResponsesModel`` on ``$OPENAI_BASE_URL``, the tap's agent an
``OpenAIChatCompletionsModel`` with an ``AsyncOpenAI(base_url=...)``. Each settles with the
expected answer, its model calls are the requests the fake counted, and a durable run replays
offline with none."""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    LocalShellTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from tether.engine import Runtime
from tether.integrations.openai_agents import TetherSession, UnsupportedConstruct
from tether.store import Store

from ...fakes.openai_server import Answer, FakeOpenAI
from ..cuts import harness_of, replay_sends_nothing
from ..doc_examples import (
    LOOKUP,
    Page,
    Shop,
    TapReader,
    memory_only,
    pycon_session,
    run_example,
    serve_the_shop,
)
from .over_http import replay_sends_nothing as replay_agent_sends_nothing
from .over_http import run_durably

Make = Callable[..., Runtime]
PAGE = Page("openai-agents.md")
TAP = "OpenAIAgentsTurn(result"
ADAPTER = "# myapp.py"
GUARDRAIL = "@input_guardrail"
REFUSAL = ">>> durable(Agent("
MCP = "mcp_servers=[server]"
SESSION = 'TetherSession("ticket-42"'


def test_every_python_example_of_the_page_is_run_by_a_test() -> None:
    assert PAGE.unclaimed([TAP, ADAPTER, GUARDRAIL, REFUSAL, MCP, SESSION]) == []


@pytest.fixture
def no_sdk_traces() -> Iterator[None]:
    """The tap example runs the SDK outside a durable run, where it would send its traces to
    api.openai.com: not from a test."""
    set_tracing_disabled(True)
    try:
        yield
    finally:
        set_tracing_disabled(False)


@pytest.mark.usefixtures("no_sdk_traces")
async def test_the_tap_example_streams_a_run_on_chat_completions(
    fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.add(*LOOKUP)

    @function_tool
    async def lookup(order_id: str) -> str:
        return f"order {order_id} shipped"

    client = AsyncOpenAI(base_url=fake.url, api_key="fake")
    agent = Agent(
        name="support",
        model=OpenAIChatCompletionsModel("gpt-4.1", client),
        model_settings=ModelSettings(include_usage=True),  # another host than api.openai.com
        tools=[lookup],
    )
    reader = TapReader()
    namespace = {"agent": agent, **reader.names()}
    await run_example(PAGE.example(TAP), namespace)
    assert fake.count == 2 and fake.requests[0].path == "/v1/chat/completions"
    assert reader.contents(whole_only=True) == ["tool_response"]
    assert reader.text() == "Order 42 shipped."
    printed = capsys.readouterr().out
    assert "input_tokens=240" in printed and "num_tool_calls=1" in printed, printed
    assert reader.signals  # the tool call's span


async def test_the_adapter_example_journals_its_tools_and_its_approval(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    shop = Shop()
    namespace: dict[str, Any] = {"shop": shop}
    await run_example(PAGE.example(ADAPTER), namespace, "myapp")
    agents = namespace["agents"]()
    conversation_id = await serve_the_shop(make_runtime, store, fake, agents, shop)
    replayed = await replay_sends_nothing(
        store, fake, conversation_id, harness_of(agents["support"])
    )
    assert replayed == ["Order 42 shipped.", "Refunded."] and shop.refunds == [("42", 5.0)]


@memory_only
async def test_the_guardrail_example_journals_its_checker(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    namespace: dict[str, Any] = {}
    await run_example(PAGE.example(GUARDRAIL), namespace, "myapp")

    def support() -> Any:
        return namespace["support"]

    fake.add(Answer(text="no"), Answer(text="2 + 2 is 4."))
    run = await run_durably(make_runtime, support, "what is 2 + 2?")
    assert run.result == "2 + 2 is 4."
    assert [r.body["model"] for r in fake.requests] == ["gpt-4.1-mini", "gpt-4.1"]
    assert run.count("model_called") == 2  # the checker's call is in the log
    replayed = await replay_agent_sends_nothing(store, fake, run.conversation_id, support)
    assert replayed == ["2 + 2 is 4."]

    fake.add(Answer(text="yes"))
    tripped = await run_durably(make_runtime, support, "solve my homework")
    assert tripped.settled["status"] == "failed"
    assert "InputGuardrailTripwireTriggered" in str(tripped.settled)
    # The checker's call only (the session's log holds the first run's two before it).
    assert fake.count == 3 and tripped.count("model_called") == 3


async def test_the_refusal_example_says_what_it_shows() -> None:
    [(source, shown)] = pycon_session(PAGE.example(REFUSAL))
    namespace: dict[str, Any] = {
        "shop": Shop(),
        "LocalShellTool": LocalShellTool,
        "run_locally": lambda request: "ok",
    }
    await run_example(PAGE.example(ADAPTER), namespace, "myapp")  # its imports, as read
    with pytest.raises(UnsupportedConstruct) as refused:
        await run_example(source, namespace)
    said = f"{type(refused.value).__name__}: {refused.value}"
    assert shown.endswith("...") and said.startswith(shown.removesuffix("..."))


@pytest.mark.usefixtures("no_sdk_traces")
async def test_the_session_example_keeps_the_conversation_in_a_tether_store(
    fake: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # the example's ./tether-data
    fake.add(Answer(text="Hello, Ann."), Answer(text="You are Ann."))
    await run_example(PAGE.example(SESSION), {})
    assert capsys.readouterr().out.splitlines() == ["You are Ann.", "4"]
    second = [item.get("content") for item in fake.requests[1].body["input"]]
    assert second[0] == "I am Ann." and second[-1] == "What is my name?" and len(second) == 3
    async with TetherSession("ticket-42", "sqlite:///./tether-data") as session:
        assert len(await session.get_items()) == 4  # in the store, for the next process
