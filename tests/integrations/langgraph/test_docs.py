"""Every Python example of docs/langgraph.md, run as written on the real ChatOpenAI over HTTP to
the fake OpenAI API (issue 36 item 3): each settles with the expected answer, its model calls
are the requests the fake counted, and a durable run replays offline with none."""

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from pydantic import JsonValue

from tether.engine import AgentDefinition, Runtime
from tether.integrations.langgraph import durable
from tether.records import Record
from tether.store import Store

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ..approvals import decide_parked
from ..cuts import harness_of, replay_sends_nothing
from ..doc_examples import Page, TapReader, memory_only, run_example
from .test_interrupt import pending_input, state_step

Make = Callable[..., Runtime]
PAGE = Page("langgraph.md")
TAP = "LangGraphTurn(source"
ADAPTER = "# myapp.py"
STATE = "class State(MessagesState):"
INTERRUPT = "class Review(MessagesState):"
CHECKPOINTER = 'TetherCheckpointer("sqlite:///./tether-data")'


def test_every_python_example_of_the_page_is_run_by_a_test() -> None:
    assert PAGE.unclaimed([TAP, ADAPTER, STATE, INTERRUPT, CHECKPOINTER]) == []


def readers_tools(sent: list[str]) -> dict[str, BaseTool]:
    """The tools the adapter example leaves to the reader: ``search`` and ``send_email``."""

    @tool
    async def search(query: str) -> str:
        """Search the web."""
        return f"results for {query}"

    @tool
    async def send_email(to: str, body: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    return {"search": search, "send_email": send_email}


async def adapter_example(sent: list[str]) -> dict[str, Any]:
    namespace: dict[str, Any] = {**readers_tools(sent)}
    await run_example(PAGE.example(ADAPTER), namespace, "myapp")
    return namespace


async def example_agent(phrase: str, name: str) -> AgentDefinition:
    """The ``build()`` of the page's example holding ``phrase``, durable on ChatOpenAI."""
    namespace: dict[str, Any] = {}
    await run_example(PAGE.example(phrase), namespace)
    return durable(namespace["build"], model=ChatOpenAI(model="gpt-4o"), name=name)


def kinds(records: list[Record]) -> list[str]:
    return [r.kind for r in records if "delta" not in r.kind]


async def test_the_tap_example_streams_a_graph_on_chat_openai(fake: FakeOpenAI) -> None:
    fake.add(Answer(calls=(Call("search", {"query": "tides"}),)), Answer(text="High at noon."))
    adapter = await adapter_example([])
    # Another host than api.openai.com streams its usage only when asked (as the page says).
    model = ChatOpenAI(model="gpt-4o", stream_usage=True)
    graph = adapter["build"](model, [adapter["search"]])
    reader = TapReader()
    namespace = {"graph": graph, **reader.names()}
    await run_example(PAGE.example(TAP), namespace)
    assert fake.count == 2
    assert reader.contents() == ["tool_request", "tool_response", "text"]
    assert reader.text() == "High at noon."
    usage = namespace["usage"]
    assert (usage.num_llm_calls, usage.num_tool_calls) == (2, 1)
    assert (usage.input_tokens, usage.output_tokens) == (240, 60)
    assert reader.signals  # the tracer saw the turn's spans


async def test_the_adapter_example_journals_its_react_graph_and_its_approval(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    sent: list[str] = []
    agents = (await adapter_example(sent))["agents"]()
    email = {"to": "ann@example.com", "body": "Tides are high at noon."}
    fake.add(Answer(calls=(Call("search", {"query": "tides"}),)), Answer(text="High at noon."))
    fake.add(Answer(calls=(Call("send_email", email),)), Answer(text="Sent."))
    async with make_runtime(agents) as runtime:
        first = await runtime.dispatch("react", "acme", "When are the tides high?")
        assert (await settle(runtime, first.submission_id))["result"] == "High at noon."
        assert fake.count == 2
        second = await runtime.dispatch("react", "acme", "Email that to ann.")
        args, result = await decide_parked(runtime, store, second, "approve", None)
        records = await runtime.records(first.conversation_id)
    assert (args, result, sent) == (email, "Sent.", ["ann@example.com"])
    assert fake.count == 4
    assert kinds(records).count("model_called") == 4
    assert kinds(records).count("approval_decided") == 1
    replayed = await replay_sends_nothing(
        store, fake, first.conversation_id, harness_of(agents["react"])
    )
    assert replayed == ["High at noon.", "Sent."]


@memory_only
async def test_the_state_example_keeps_its_channels_between_submissions(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    counter = await example_agent(STATE, "counter")
    fake.add(Answer(text="Noon."), Answer(text="Midnight."))
    async with make_runtime({"counter": counter}) as runtime:
        for body in ("tides", "moons"):
            receipt = await runtime.dispatch("counter", "acme", body)
            await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    steps = [s["value"] for s in map(state_step, records) if s is not None]
    assert steps == [{"count": 1, "topics": ["tides"]}, {"count": 2, "topics": ["tides", "moons"]}]
    replayed = await replay_sends_nothing(store, fake, receipt.conversation_id, harness_of(counter))
    assert replayed == ["Noon.", "Midnight."]


@memory_only
async def test_the_interrupt_example_parks_for_answers_and_resumes(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    review = await example_agent(INTERRUPT, "review")
    fake.add(Answer(text="Dear team, the tide is in."))
    async with make_runtime({"review": review}) as runtime:
        receipt = await runtime.dispatch("review", "acme", "Tell the team about the tide.")
        first = await pending_input(runtime)
        assert first.args == {
            "value": {"question": "Send this draft?", "draft": "Dear team, the tide is in."}
        }
        await runtime.answer(first.approval_id, "send", responder="ann")
        second = await pending_input(runtime, after=first.seq)
        assert second.prompt == "Any note for the record?"
        await runtime.answer(second.approval_id, "cc legal", responder="ann")
        outcome: dict[str, JsonValue] = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert outcome["result"] == "Dear team, the tide is in."
    assert fake.count == 1  # the draft was asked once, served from the log on each resume
    [state] = [s["value"] for s in map(state_step, records) if s is not None]
    assert state == {"verdict": "send", "note": "cc legal"}
    replayed = await replay_sends_nothing(store, fake, receipt.conversation_id, harness_of(review))
    assert replayed == ["Dear team, the tide is in."]


async def test_the_checkpointer_example_runs_and_forks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    await asyncio.to_thread(asyncio.run, run_example(PAGE.example(CHECKPOINTER), {}))
    assert capsys.readouterr().out.splitlines() == ["('review',)", "('review',)"]
