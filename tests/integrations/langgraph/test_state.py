"""A graph's whole state, not only its messages, lasts between submissions, across restarts
and in forks, from the log alone (issue 25 item 3)."""

import asyncio
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph, add_messages
from pydantic import JsonValue
from typing_extensions import TypedDict

from tether import SessionKey
from tether.engine import Runtime
from tether.errors import ReplayDiverged
from tether.integrations.langgraph import (
    CompiledGraph,
    JournaledChatModel,
    LangGraphHarness,
    NotJournaled,
    durable,
)
from tether.integrations.langgraph._state import STATE_STEP
from tether.journal import Journal
from tether.records import Record, UserMessage
from tether.store import SqliteStore, Store

from ..conftest import FAST
from .app import SEEN, Counted, EchoChatModel, ExplodingChatModel, counter, counting

Make = Callable[..., Runtime]


async def settle(runtime: Runtime, submission_id: str) -> dict[str, JsonValue]:
    async with asyncio.timeout(60):
        return await runtime.wait(submission_id)


def states(records: list[Record]) -> list[dict[str, JsonValue]]:
    """The state each execution ended with, in log order."""
    found = []
    for record in records:
        step = record.payload.to_json_object() if record.kind == "step_recorded" else {}
        if step.get("name") == STATE_STEP:
            assert isinstance(step["value"], dict)
            found.append(step["value"])
    return found


async def ask(runtime: Runtime, body: str, session: str = "main") -> tuple[str, JsonValue]:
    receipt = await runtime.dispatch("counter", "acme", body, session=session)
    outcome = await settle(runtime, receipt.submission_id)
    assert outcome["status"] == "succeeded", outcome
    return receipt.conversation_id, outcome["result"]


@pytest.fixture(autouse=True)
def _seen() -> None:
    SEEN.clear()


async def test_a_counter_reads_1_then_2(make_runtime: Make, store: Store) -> None:
    model = EchoChatModel(calls=[])
    async with make_runtime({"counter": counting(model)}) as runtime:
        conversation_id, first = await ask(runtime, "tides")
        _, second = await ask(runtime, "moons")
        records = await runtime.records(conversation_id)
    assert (first, second) == ("echo: tides", "echo: moons")
    assert SEEN == [(0, []), (1, ["tides"])]  # what the node found: the last run's state
    assert states(records) == [
        {"count": 1, "topics": ["tides"]},
        {"count": 2, "topics": ["tides", "moons"]},
    ]
    assert model.calls == ["1:echo", "2:echo"]
    # A replay serves the state from the log and asks no model.
    replayer = LangGraphHarness(counter, model=ExplodingChatModel(), name="counter")
    journal = await Journal.open(store, conversation_id, fence=0)
    assert await journal.replay(replayer) == [first, second]
    assert SEEN[2:] == [(0, []), (1, ["tides"])]


async def test_the_state_survives_a_restart_on_sqlite(tmp_path: Path) -> None:
    for body in ("tides", "moons", "comets"):  # each submission on a fresh store and runtime
        store = await SqliteStore.open(tmp_path)
        try:
            async with Runtime({"counter": counting()}, store, **FAST) as runtime:
                conversation_id, _ = await ask(runtime, body)
                records = await runtime.records(conversation_id)
        finally:
            await store.close()
    assert [state["count"] for state in states(records)] == [1, 2, 3]
    assert SEEN == [(0, []), (1, ["tides"]), (2, ["tides", "moons"])]


async def test_a_fork_sees_the_state_at_its_cut(make_runtime: Make, store: Store) -> None:
    async with make_runtime({"counter": counting()}) as runtime:
        conversation_id, _ = await ask(runtime, "tides")
        await ask(runtime, "moons")
        records = await runtime.records(conversation_id)
        cut = next(r.seq for r in records if r.kind == "submission_settled")
        await runtime.fork(conversation_id, at_seq=cut, session="what-if")
        child_id, _ = await ask(runtime, "comets", session="what-if")
        await ask(runtime, "stars")  # the parent goes on from its own state
        child = await runtime.records(child_id)
        parent = await runtime.records(conversation_id)
    assert states(child)[-1] == {"count": 2, "topics": ["tides", "comets"]}
    assert states(parent)[-1] == {"count": 3, "topics": ["tides", "moons", "stars"]}
    assert SEEN[2] == (1, ["tides"])  # the child's run found the state as of the cut


class Narrow(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class Whole(MessagesState):
    runs: Annotated[list[int], operator.add]
    profile: dict[str, Any]


class Scratch(TypedDict):
    note: str


class Noted(Whole):
    note: str


def narrow(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    """Input only messages; a private channel (``note``) only the nodes read and write."""

    async def remember(state: Whole) -> Scratch:
        return {"note": f"after {len(state.get('runs', []))} runs"}

    async def answer(state: Noted) -> dict[str, Any]:
        seen = (state.get("profile", {}).get("note"), len(state.get("runs", [])))
        SEEN.append((seen[1], [str(seen[0]), state["note"]]))
        reply: BaseMessage = await model.ainvoke(state["messages"])
        return {"messages": [reply], "runs": [seen[1] + 1], "profile": {"note": "kept"}}

    graph = StateGraph(Whole, input_schema=Narrow)
    graph.add_node("remember", remember)
    graph.add_node("answer", answer)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "answer")
    graph.add_edge("answer", END)
    return graph.compile()


async def open_session(store: Store) -> Journal:
    key = SessionKey("narrow", "acme")
    conversation, _ = await store.ensure_conversation(
        key, conversation_id="conv-narrow", created_at=datetime.now(UTC)
    )
    return await Journal.open(store, conversation.id)


async def test_private_channels_and_a_narrow_input_schema_are_kept(store: Store) -> None:
    harness = LangGraphHarness(narrow, model=EchoChatModel(calls=[]), name="narrow")
    journal = await open_session(store)
    for body in ("one", "two", "three"):
        await journal.exec(harness, [UserMessage(body=body)])
    records = await store.read(journal.conversation.id)
    assert states(records)[-1] == {
        "runs": [1, 2, 3],  # an add reducer, restored as it was (not added to itself)
        "profile": {"note": "kept"},
        "note": "after 2 runs",  # the private channel, which the input schema does not take
    }
    assert SEEN == [
        (0, ["None", "after 0 runs"]),
        (1, ["kept", "after 1 runs"]),
        (2, ["kept", "after 2 runs"]),
    ]


class Dated(MessagesState):
    when: datetime


def dated(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    async def agent(state: Dated) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])], "when": datetime.now(UTC)}

    graph = StateGraph(Dated)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile()


async def test_a_state_value_that_is_not_json_fails_the_run_loudly(make_runtime: Make) -> None:
    agent = durable(dated, model=EchoChatModel(calls=[]), name="dated")
    async with make_runtime({"dated": agent}) as runtime:
        receipt = await runtime.dispatch("dated", "acme", "hi")
        outcome = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert outcome["status"] == "failed"
    # The node's update is refused as it streams, before the state is recorded.
    assert "the update of 'when' by node 'agent' holds a datetime" in str(outcome["error"])
    assert not states(records)
    [failed] = [r.payload.to_json_object() for r in records if r.kind == "execution_failed"]
    assert failed["errorCode"] == NotJournaled.code


TICKS: list[int] = []


def ticking(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    """A node whose state comes from outside the journal (a process-wide tick)."""

    async def agent(state: Counted) -> dict[str, Any]:
        TICKS.append(len(TICKS))
        return {"messages": [await model.ainvoke(state["messages"])], "count": TICKS[-1]}

    graph = StateGraph(Counted)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile()


async def test_a_replay_that_makes_another_state_diverges(store: Store) -> None:
    journal = await open_session(store)
    TICKS[:] = [0, 1, 2]
    await journal.exec(
        LangGraphHarness(ticking, model=EchoChatModel(calls=[]), name="tick"),
        [UserMessage(body="hi")],
    )
    replayer = LangGraphHarness(ticking, model=ExplodingChatModel(), name="tick")
    with pytest.raises(ReplayDiverged, match=r"note .* differs from the recorded one"):
        await (await Journal.open(store, journal.conversation.id, fence=0)).replay(replayer)


async def test_a_log_recorded_without_the_state_still_replays(store: Store) -> None:
    older = LangGraphHarness(counter, model=EchoChatModel(calls=[]), name="counter")
    older._kept = {}  # as the adapter recorded before it kept the state
    journal = await open_session(store)
    for body in ("tides", "moons"):
        await journal.exec(older, [UserMessage(body=body)])
    assert not states(await store.read(journal.conversation.id))
    replayer = LangGraphHarness(counter, model=ExplodingChatModel(), name="counter")
    replayed = await (await Journal.open(store, journal.conversation.id, fence=0)).replay(replayer)
    assert replayed == ["echo: tides", "echo: moons"]
