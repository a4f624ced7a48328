"""``TetherCheckpointer``: LangGraph's own checkpointer suite at its FULL level, and an
unmodified graph compiled with it (``get_state``, ``get_state_history``, ``update_state``,
``interrupt`` and ``Command(resume=...)``, time travel) on memory, SQLite and PostgreSQL
(issue 42 item 3)."""

import asyncio
import operator
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt

from tether.engine import Memory, Runtime
from tether.errors import NotJournaled
from tether.integrations.langgraph import TetherCheckpointer, TetherStore, UnsupportedConstruct
from tether.records import StepRecorded
from tether.store import MemoryStore, SessionKey

from ...postgres import fresh_schema, store_url


class Urls:
    """Store URLs of one backend: ``memory://`` is a new store each time, so a test that
    reopens one keeps its checkpointer open instead."""

    def __init__(self, backend: str, root: Path) -> None:
        self.backend = backend
        self.root = root
        self.made = 0

    def fresh(self) -> str:
        self.made += 1
        if self.backend == "memory":
            return "memory://"
        if self.backend == "sqlite":
            return f"sqlite:///{self.root / f'store-{self.made}'}"
        return store_url(fresh_schema())


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def urls(request: pytest.FixtureRequest, tmp_path: Path) -> Urls:
    return Urls(request.param, tmp_path)


async def test_langgraph_conformance_suite_passes_at_full_level(urls: Urls) -> None:
    @checkpointer_test(name=f"tether-{urls.backend}")
    async def saver() -> AsyncIterator[TetherCheckpointer]:
        async with TetherCheckpointer(urls.fresh()) as opened:
            yield opened

    report = await validate(saver)
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert not failures
    assert report.conformance_level() == "FULL"
    passed = {name for name, r in report.results.items() if r.passed}
    assert passed == {"put", "put_writes", "get_tuple", "list", "delete_thread", "copy_thread"}


class Review(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    drafts: Annotated[list[str], operator.add]


def draft(state: Review) -> dict[str, Any]:
    return {"drafts": [f"draft {len(state['drafts']) + 1}"]}


def review(state: Review) -> dict[str, Any]:
    verdict = interrupt({"question": "send it?", "draft": state["drafts"][-1]})
    return {"messages": [AIMessage(content=f"{state['drafts'][-1]}: {verdict}")]}


def review_graph(
    saver: TetherCheckpointer, **compiled: Any
) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(Review)
    builder.add_node("draft", draft)
    builder.add_node("review", review)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=saver, **compiled)


THREAD: RunnableConfig = {"configurable": {"thread_id": "t1"}}
ASK: dict[str, Any] = {"messages": [HumanMessage(content="write the memo")], "drafts": []}


@pytest.fixture
def saver_of(urls: Urls) -> Iterator[Any]:
    """Opens checkpointers on one store (kept open for ``memory://``), all closed after."""
    url = urls.fresh()
    opened: list[TetherCheckpointer] = []

    def reopen() -> TetherCheckpointer:
        if urls.backend == "memory" and opened:
            return opened[0]
        opened.append(TetherCheckpointer(url))
        return opened[-1]

    yield reopen
    for saver in opened:
        saver.close()


async def test_an_interrupted_graph_resumes_on_another_checkpointer(saver_of: Any) -> None:
    first = review_graph(saver_of())
    await first.ainvoke(ASK, THREAD)
    state = await first.aget_state(THREAD)
    assert state.next == ("review",)
    [asked] = state.interrupts
    assert asked.value == {"question": "send it?", "draft": "draft 1"}

    # Another process's saver on the same store finds the thread where it stopped.
    again = review_graph(saver_of())
    done = await again.ainvoke(Command(resume="yes"), THREAD)
    assert done["drafts"] == ["draft 1"]
    assert [m.content for m in done["messages"]] == ["write the memo", "draft 1: yes"]
    assert isinstance(done["messages"][-1], AIMessage)
    assert (await again.aget_state(THREAD)).next == ()


async def test_history_update_state_and_time_travel(saver_of: Any) -> None:
    saver = saver_of()
    graph = review_graph(saver)
    # The sync API from another thread: graph.invoke, as a script would call it.
    await asyncio.to_thread(graph.invoke, ASK, THREAD)
    await asyncio.to_thread(graph.invoke, Command(resume="no"), THREAD)

    history = [s async for s in graph.aget_state_history(THREAD)]
    assert [s.next for s in history] == [(), ("review",), ("draft",), ("__start__",)]
    assert [s.metadata["source"] for s in history if s.metadata] == [
        "loop",
        "loop",
        "loop",
        "input",
    ]

    updated = await graph.aupdate_state(THREAD, {"drafts": ["draft 2"]}, as_node="draft")
    state = await graph.aget_state(THREAD)
    assert state.values["drafts"] == ["draft 1", "draft 2"]
    assert state.next == ("review",)
    assert state.metadata is not None and state.metadata["source"] == "update"
    done = await graph.ainvoke(Command(resume="yes"), updated)
    assert done["messages"][-1].content == "draft 2: yes"

    # Back to before the first review: a new thread forked at that checkpoint.
    before_review = history[1]
    branch = await saver.afork(before_review.config, "t1-retry")
    forked = await graph.aget_state(branch)
    assert forked.values == before_review.values
    assert forked.next == ("review",)
    retried = await graph.ainvoke(Command(resume="maybe"), branch)
    assert retried["messages"][-1].content == "draft 1: maybe"
    assert (await graph.aget_state(THREAD)).values["drafts"] == ["draft 1", "draft 2"]

    # LangGraph's own time travel, in the thread (as its InMemorySaver answers): a replay
    # from there runs the review again, which asks again, on a new branch of the thread.
    replayed = await graph.ainvoke(None, before_review.config)
    assert replayed["messages"][-1].content == "write the memo"


async def test_checkpoints_are_records_of_the_threads_session(urls: Urls) -> None:
    url = urls.fresh()
    if urls.backend == "memory":
        pytest.skip("a second opening of memory:// is another store")
    async with TetherCheckpointer(url) as saver:
        await review_graph(saver).ainvoke(ASK, THREAD)
    async with Runtime({}, store=url) as runtime:
        conversation = await runtime.store.find_conversation(
            SessionKey("langgraph", "threads", "t1")
        )
        records = await runtime.records(conversation.id)
        steps = [r.payload for r in records if isinstance(r.payload, StepRecorded)]
        names = [s.name for s in steps]
        assert names.count("langgraph.checkpoint") == 3
        assert "langgraph.writes" in names
        assert await runtime.verify(conversation.id) == len(records)


async def test_a_graph_with_a_store_is_refused(saver_of: Any) -> None:
    graph = review_graph(saver_of(), store=InMemoryStore())
    with pytest.raises(UnsupportedConstruct, match="other than TetherStore"):
        await graph.ainvoke(ASK, THREAD)


async def test_a_graph_with_tethers_store_is_checkpointed(saver_of: Any) -> None:
    """Tether's long-term memory (``TetherStore``) is no store outside Tether's: accepted."""
    graph = review_graph(saver_of(), store=TetherStore(Memory(MemoryStore())))
    await graph.ainvoke(ASK, THREAD)


async def test_pickle_is_refused(saver_of: Any) -> None:
    with pytest.raises(ValueError, match="pickle"):
        TetherCheckpointer("memory://", serde=JsonPlusSerializer(pickle_fallback=True))

    class Opaque:
        __slots__ = ()

    saver = saver_of()
    with pytest.raises(NotJournaled, match="without pickle"):
        await saver.aput(
            {"configurable": {"thread_id": "t2", "checkpoint_ns": ""}},
            {
                "v": 1,
                "id": "1",
                "ts": "2026-01-01T00:00:00+00:00",
                "channel_values": {"x": Opaque()},
                "channel_versions": {"x": 1},
                "versions_seen": {},
                "updated_channels": None,
            },
            {},
            {"x": 1},
        )
    assert await saver.aget_tuple({"configurable": {"thread_id": "t2"}}) is None
