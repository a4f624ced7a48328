"""The built-in agent's long-term memory: ``remember`` and ``recall`` offered only when the
application gives the agent a memory, each read and write a journaled step of its tool call,
so a replay returns what the run saw after the memory changed, calling neither the store
nor the embedding function (docs/memory.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tether.agent import Agent, AgentMemory, agent_spec
from tether.engine import AgentDefinition, Memory, Runtime
from tether.journal import Journal
from tether.models import Rule, ScriptedModel, ToolUse
from tether.records import Record, StepRecorded, ToolOutcome
from tether.store import MemoryItemStore, Store, StoreCapabilities

from ..engine.test_runtime import settle

Make = Callable[..., Runtime]
NAMESPACE = ("acme", "u-1")


class Letters:
    """A deterministic embedding: how often each of a few letters occurs; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return [[float(text.count(letter)) + 0.1 for letter in "aeiost"] for text in texts]


def scripted() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule("keep", ToolUse("remember", {"key": "drink", "fact": "green tea"})),
            Rule("what", ToolUse("recall", {"query": "tea"})),
            Rule("", "done", on="tool"),
        ]
    )


def outcomes(records: Sequence[Record]) -> list[str]:
    return [str(r.payload.content) for r in records if isinstance(r.payload, ToolOutcome)]


def memory_of(store: Store) -> MemoryItemStore:
    found = StoreCapabilities.of(store).memory
    assert found is not None
    return found


async def test_remember_then_recall_in_another_session_and_replay_sees_the_past(
    make_runtime: Make, store: Store
) -> None:
    embed = Letters()
    memory = Memory(store, embed=embed)
    options = AgentMemory(memory, namespace=NAMESPACE)
    spec = agent_spec(scripted(), memory=options)
    async with make_runtime({"bot": AgentDefinition(lambda i, e: spec)}) as runtime:
        kept = await runtime.dispatch("bot", "acme", "keep this", session="s1")
        assert (await settle(runtime, kept.submission_id))["result"] == "done"
        asked = await runtime.dispatch("bot", "acme", "what do I drink?", session="s2")
        assert (await settle(runtime, asked.submission_id))["result"] == "done"
    item = await memory.get(NAMESPACE, "drink")
    assert item is not None and item.value == "green tea"
    recalled = outcomes(await store.read(asked.conversation_id))
    assert len(recalled) == 1 and "green tea" in recalled[0]
    steps = [
        r.payload
        for r in await store.read(asked.conversation_id)
        if isinstance(r.payload, StepRecorded)
    ]
    assert [s.name for s in steps] == ["memory.search.1"]

    # The memory changes; a replay of the recall serves what the run saw, with no store
    # read and no embedding.
    await memory_of(store).erase_memory(())
    await memory.put(NAMESPACE, "drink", "black coffee")
    calls = embed.calls

    def unreachable() -> Store:
        raise AssertionError("a replay reads no memory")

    replaying = Memory(unreachable, embed=embed)
    harness = agent_spec(scripted(), memory=AgentMemory(replaying, namespace=NAMESPACE)).harness
    journal = await Journal.open(store, asked.conversation_id, fence=0)
    assert await journal.replay(harness) == ["done"]
    assert embed.calls == calls


def test_the_memory_tools_are_offered_only_when_asked_for() -> None:
    assert "remember" not in Agent().tools and "recall" not in Agent().tools
    memory = Memory(lambda: None)  # type: ignore[arg-type,return-value]
    offered = Agent(memory=AgentMemory(memory)).tools
    assert {"remember", "recall"} <= set(offered)
    assert offered["remember"].idempotent and offered["recall"].idempotent
