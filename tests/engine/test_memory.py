"""``tether.Memory``: long-term memory over the store's ``memory`` capability, and its
journaled view, whose reads and writes a run records as steps, so a replay or a resume
serves what the run saw after the memory changed (docs/memory.md)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta

import pytest
from pydantic import JsonValue

from tether.engine import (
    AgentDefinition,
    AgentSpec,
    ManualClock,
    Memory,
    Retention,
    Runtime,
    memory_text,
)
from tether.errors import StoreCapabilityMissing
from tether.journal import Journal, Turn
from tether.records import StepRecorded
from tether.store import Store

from .test_runtime import settle

Make = Callable[..., Runtime]
NS = ("acme", "u-1", "support")


async def axes(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic embedding: ``tea`` and ``coffee`` on two axes."""
    return [[float("tea" in t), float("coffee" in t), 0.01] for t in texts]


async def test_put_get_list_and_search(store: Store) -> None:
    clock = ManualClock()
    memory = Memory(store, embed=axes, clock=clock)
    first = await memory.put(NS, "drink", {"likes": "green tea"})
    assert first.text == "likes green tea" and first.created_at == first.updated_at
    await clock.advance(5)
    await memory.put(NS, "snack", "coffee cake")
    await memory.put(NS, "secret", "tea leaves", index=False)  # no embedding
    await memory.put(("acme", "u-2"), "drink", "tea")
    assert [i.key for i in await memory.list(NS)] == ["drink", "secret", "snack"]
    assert await memory.namespaces(("acme",)) == [("acme", "u-1", "support"), ("acme", "u-2")]
    semantic = await memory.search(NS, "a cup of tea")
    assert [hit.item.key for hit in semantic] == ["drink", "snack"]
    assert semantic[0].score is not None and semantic[0].score > semantic[1].score  # type: ignore[operator]
    keyword = await Memory(store).search(NS, "tea")  # no embedding function: keywords
    assert [hit.item.key for hit in keyword] == ["secret", "drink"]
    both = await memory.search(NS, "cake please", keywords="cake")
    assert [hit.item.key for hit in both] == ["snack"]
    assert await memory.delete(NS, "secret") and await memory.get(NS, "secret") is None
    assert await memory.erase(("acme",)) == 3
    assert await memory.list() == []


def test_the_text_of_a_value_is_its_strings() -> None:
    assert memory_text("plain") == "plain"
    assert memory_text({"a": ["b", 1, {"c": None}], "d": True}) == "a b c d"


async def test_a_store_without_memory_is_refused_by_name() -> None:
    class Bare:
        pass

    with pytest.raises(StoreCapabilityMissing) as refused:
        await Memory(Bare()).get(NS, "k")  # type: ignore[arg-type]
    assert "memory" in str(refused.value)


async def test_a_write_cut_before_its_record_is_repeated_harmlessly(store: Store) -> None:
    """A crash after the store write and before its record runs the step again on resume:
    the put writes the same value again (created_at kept), nothing twice."""
    clock = ManualClock()
    memory = Memory(store, clock=clock)
    await memory.put(NS, "drink", "tea")  # kept by an earlier run

    async def crashing(name: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
        await fn()
        raise ConnectionError("the worker died before the step's record")

    with pytest.raises(ConnectionError):
        await memory.journaled(crashing).put(NS, "drink", "green tea")
    await clock.advance(1)

    async def recorded(name: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
        return await fn()

    again = await memory.journaled(recorded).put(NS, "drink", "green tea")
    assert again.value == "green tea" and again.created_at < again.updated_at
    assert [(i.key, i.value) for i in await memory.list(NS)] == [("drink", "green tea")]


class Reader:
    """A harness that reads and writes memory through its turn's steps."""

    name, version = "reader", "1"

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    async def run(self, turn: Turn) -> JsonValue:
        journaled = self.memory.journaled(turn.step)
        before = await journaled.get(NS, "drink")
        await journaled.put(NS, "visits", 1)
        hits = await journaled.search(NS, "tea")
        return {
            "drink": None if before is None else before.value,
            "found": [hit.item.key for hit in hits],
        }


async def test_a_replay_serves_what_the_run_saw(make_runtime: Make, store: Store) -> None:
    memory = Memory(store)
    await memory.put(NS, "drink", "green tea")
    harness = Reader(memory)
    definition = AgentDefinition(lambda i, e: AgentSpec(harness=harness))
    async with make_runtime({"reader": definition}) as runtime:
        receipt = await runtime.dispatch("reader", "acme", "go")
        settled = await settle(runtime, receipt.submission_id)
    saw = {"drink": "green tea", "found": ["drink"]}
    assert settled == {"status": "succeeded", "result": saw}
    steps = [r.payload for r in await store.read(receipt.conversation_id)]
    names = [s.name for s in steps if isinstance(s, StepRecorded)]
    assert names == ["memory.get", "memory.put", "memory.search"]

    await memory.erase(())
    await memory.put(NS, "drink", "black coffee")

    def unreachable() -> Store:
        raise AssertionError("a replay reads no memory")

    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(Reader(Memory(unreachable))) == [saw]
    assert [i.value for i in await memory.list(NS)] == ["black coffee"]  # no write replayed


async def test_retention_erases_memory_idle_past_its_limit(
    make_runtime: Make, store: Store
) -> None:
    """``Retention(memory_after_idle=...)``: a pass erases the items not put again since;
    a dry run leaves memory alone."""
    clock = ManualClock()
    memory = Memory(store, clock=clock)
    runtime = make_runtime({}, clock=clock)
    await runtime.start()
    try:
        await memory.put(NS, "old", 1)
        await memory.put(NS, "renewed", 1)
        await clock.advance(20 * 86400)
        await memory.put(NS, "renewed", 2)
        await memory.put(("beta",), "recent", 1)
        policy = Retention(memory_after_idle=timedelta(days=10))
        await clock.advance(86400)
        assert (await runtime.prune(policy, dry_run=True)).memory_erased == 0
        assert len(await memory.list()) == 3
        assert (await runtime.prune(policy)).memory_erased == 1
        assert [(i.namespace, i.key) for i in await memory.list()] == [
            (NS, "renewed"),
            (("beta",), "recent"),
        ]
    finally:
        await runtime.close()
    with pytest.raises(ValueError, match="memory_after_idle"):
        Retention(memory_after_idle=timedelta(0))
