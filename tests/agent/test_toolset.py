"""Toolsets in the built-in agent: the listing is a step (listed once live, served on replay),
the found tools run through the journal, and the toolset is released however the run ends."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from pydantic import JsonValue

from tether.agent import Agent, Tool, Toolset, agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.journal import Journal
from tether.models import Rule, ScriptedModel, ToolUse
from tether.records import StepRecorded
from tether.store import Store

from ..engine.test_runtime import settle

Make = Callable[..., Runtime]


class Dice(Toolset):
    """A toolset whose listing is one tool, ``roll``, unless told otherwise."""

    def __init__(self, names: Sequence[str] = ("roll",)) -> None:
        self.name = "dice"
        self.names = list(names)
        self.listed = 0
        self.released: list[str] = []

    async def list_tools(self, execution_id: str) -> JsonValue:
        self.listed += 1
        return list[JsonValue](self.names)

    def tools(self, listing: JsonValue, execution_id: str) -> Sequence[Tool]:
        assert isinstance(listing, list)

        def make(name: str) -> Tool:
            @tool(name=name, idempotent=True)
            async def roll() -> int:
                """Roll a die."""
                return 4

            return roll

        return [make(str(name)) for name in listing]

    async def release(self, execution_id: str) -> None:
        self.released.append(execution_id)


def rolling() -> ScriptedModel:
    return ScriptedModel([Rule("roll", ToolUse("roll", {})), Rule("", "rolled", on="tool")])


async def test_the_listing_is_a_step_and_replay_lists_nothing(
    make_runtime: Make, store: Store
) -> None:
    dice = Dice()
    spec = agent_spec(rolling(), tools=[dice])
    async with make_runtime({"bot": AgentDefinition(lambda i, e: spec)}) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "roll")
        assert (await settle(runtime, receipt.submission_id))["result"] == "rolled"
    assert dice.listed == 1 and len(dice.released) == 1
    steps = [
        r.payload for r in await store.read(receipt.conversation_id) if r.kind == "step_recorded"
    ]
    assert [(s.name, s.value) for s in steps if isinstance(s, StepRecorded)] == [
        ("tether.toolset:dice", ["roll"])
    ]
    replayed = Dice(names=())  # what it would list now does not matter: the log says
    harness = agent_spec(rolling(), tools=[replayed]).harness
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(harness) == ["rolled"]
    assert replayed.listed == 0


async def test_a_found_tool_may_not_shadow_another(make_runtime: Make) -> None:
    @tool
    async def roll() -> int:
        """Mine."""
        return 6

    dice = Dice()
    spec = agent_spec(rolling(), tools=[roll, dice])
    async with make_runtime({"bot": AgentDefinition(lambda i, e: spec)}) as runtime:
        receipt = await runtime.dispatch("bot", "acme", "roll")
        settled = await settle(runtime, receipt.submission_id)
    assert settled["status"] == "failed" and "would shadow" in str(settled)
    assert len(dice.released) == 1  # released though the run failed


def test_toolsets_are_pinned_and_named_once() -> None:
    assert "toolsets" not in Agent().pins()
    assert Agent(tools=[Dice()]).pins()["toolsets"] == {"dice": "dice"}
    with pytest.raises(ValueError, match="toolset names must be unique"):
        Agent(tools=[Dice(), Dice()])
