"""LangGraph's ``store=`` on Tether's memory (issue 43 item 6): a graph compiled with
``TetherStore`` reads and writes long-term memory from its nodes (async and sync), each
operation a journaled step, so a replay serves what the run saw after the memory changed,
with no store read; outside a run the store answers directly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedStore, create_react_agent
from langgraph.store.base import BaseStore

from tether import SessionKey
from tether.engine import AgentDefinition, Memory, Runtime
from tether.integrations.langgraph import (
    CompiledGraph,
    JournaledChatModel,
    LangGraphHarness,
    TetherStore,
    durable,
)
from tether.journal import Journal
from tether.records import StepRecorded, ToolOutcome, UserMessage
from tether.store import MemoryStore, Store

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ..cuts import harness_of, replay_sends_nothing
from .app import EchoChatModel, ExplodingChatModel

USER = ("acme", "u-1")


async def letters(texts: Sequence[str]) -> list[list[float]]:
    return [[float(text.count(letter)) + 0.1 for letter in "aeiot"] for text in texts]


def graph_on(
    memory: Memory, *, sync: bool = False
) -> Callable[[JournaledChatModel, list[BaseTool]], CompiledGraph]:
    def build(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
        async def recall(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
            found = await store.aget(USER, "drink")
            await store.aput(USER, "last", {"text": str(state["messages"][-1].content)})
            hits = await store.asearch(("acme",), query="tea", limit=2)
            names = await store.alist_namespaces(prefix=("acme",))
            text = f"drink={found.value if found else None} hits={[h.key for h in hits]} ns={names}"
            return {"messages": [AIMessage(content=text)]}

        def recall_sync(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
            found = store.get(USER, "drink")
            store.put(USER, "last", {"text": "sync"}, index=False)
            return {"messages": [AIMessage(content=f"drink={found.value if found else None}")]}

        graph = StateGraph(MessagesState)
        graph.add_node("recall", recall_sync if sync else recall)
        graph.add_edge(START, "recall")
        graph.add_edge("recall", END)
        return graph.compile(store=TetherStore(memory))

    return build


async def _session(store: Store) -> Journal:
    conversation, _ = await store.ensure_conversation(
        SessionKey("graph", "acme"), conversation_id="conv", created_at=datetime.now(UTC)
    )
    return await Journal.open(store, conversation.id)


def unreachable() -> Store:
    raise AssertionError("a replay reads no memory")


async def test_a_graph_reads_and_writes_memory_and_replays_what_it_saw() -> None:
    store = MemoryStore()
    memory = Memory(store, embed=letters)
    await TetherStore(memory).aput(USER, "drink", {"kind": "green tea"})  # outside a run
    journal = await _session(store)
    harness = LangGraphHarness(graph_on(memory), model=EchoChatModel(calls=[]), name="graph")
    output = (await journal.exec(harness, [UserMessage(body="hello")])).output
    assert output == ("drink={'kind': 'green tea'} hits=['drink', 'last'] ns=[('acme', 'u-1')]")
    steps = [r.payload for r in await store.read("conv") if isinstance(r.payload, StepRecorded)]
    assert [s.name for s in steps if s.name.startswith("memory.")] == [
        "memory.get",
        "memory.put",
        "memory.search",
        "memory.namespaces",
    ]
    last = await memory.get(USER, "last")
    assert last is not None and last.value == {"text": "hello"}

    await memory.erase(())
    replayer = LangGraphHarness(
        graph_on(Memory(unreachable)), model=ExplodingChatModel(), name="graph"
    )
    assert await (await Journal.open(store, "conv", fence=0)).replay(replayer) == [output]
    assert await memory.list() == []  # the replay wrote nothing


async def test_a_sync_node_reaches_the_store_through_the_run() -> None:
    store = MemoryStore()
    memory = Memory(store)
    await memory.put(USER, "drink", {"kind": "tea"})
    journal = await _session(store)
    harness = LangGraphHarness(
        graph_on(memory, sync=True), model=EchoChatModel(calls=[]), name="graph"
    )
    output = (await journal.exec(harness, [UserMessage(body="hello")])).output
    assert output == "drink={'kind': 'tea'}"
    last = await memory.get(USER, "last")
    assert last is not None and last.value == {"text": "sync"}
    replayer = LangGraphHarness(
        graph_on(Memory(unreachable), sync=True), model=ExplodingChatModel(), name="graph"
    )
    assert await (await Journal.open(store, "conv", fence=0)).replay(replayer) == [output]


def remembering_agent(memory: Memory) -> AgentDefinition:
    """A prebuilt react agent on the real ChatOpenAI whose tool writes and reads the store
    (``InjectedStore``), compiled with ``TetherStore``."""

    @tool
    async def remember(fact: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
        """Remember a fact about the user."""
        before = await store.aget(USER, "fact")
        await store.aput(USER, "fact", {"text": fact})
        return f"kept (was {before.value['text'] if before else None})"

    def build(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
        return create_react_agent(model, tools, store=TetherStore(memory))

    return durable(
        build, model=ChatOpenAI(model="gpt-4o", max_retries=0), tools=[remember], name="react"
    )


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
async def test_a_tool_given_the_store_journals_its_operations_in_its_call(
    make_runtime: Callable[..., Runtime], store: Store, fake: FakeOpenAI
) -> None:
    memory = Memory(store)
    agent = remembering_agent(memory)
    fake.add(Answer(calls=(Call("remember", {"fact": "likes tea"}),)), Answer(text="Noted."))
    async with make_runtime({"react": agent}) as runtime:
        receipt = await runtime.dispatch("react", "acme", "I like tea")
        assert (await settle(runtime, receipt.submission_id))["result"] == "Noted."
        records = await runtime.records(receipt.conversation_id)
    kept = await memory.get(USER, "fact")
    assert kept is not None and kept.value == {"text": "likes tea"}
    steps = [r.payload for r in records if isinstance(r.payload, StepRecorded)]
    memory_steps = [(s.name, bool(s.call_id)) for s in steps if s.name.startswith("memory.")]
    assert memory_steps == [("memory.get.1", True), ("memory.put.2", True)]
    outcome = [r.payload for r in records if isinstance(r.payload, ToolOutcome)]
    assert [o.content for o in outcome] == ["kept (was None)"]
    await memory.erase(())
    replayer = remembering_agent(Memory(unreachable))
    assert await replay_sends_nothing(
        store, fake, receipt.conversation_id, harness_of(replayer)
    ) == ["Noted."]
