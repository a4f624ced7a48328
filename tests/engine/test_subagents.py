"""Delegation policy (issue 21, item 1): who may spawn whom, and how far."""

import pytest

from tests.engine.agents import echo_agent
from tether.engine import AgentDefinition, Runtime, SubagentLimits, SubagentPolicy
from tether.store import MemoryStore


def test_the_seed_defaults() -> None:
    limits = SubagentLimits()
    assert (limits.max_children_per_run, limits.max_depth, limits.max_wait) == (8, 1, None)
    assert limits.max_total == 100 and SubagentLimits(max_total=None).max_total is None


@pytest.mark.parametrize(
    "settings",
    [
        {"max_children_per_run": 0},
        {"max_depth": 0},
        {"max_wait": 0},
        {"max_wait": -1.0},
        {"max_total": 0},
    ],
)
def test_limits_that_allow_nothing_are_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SubagentLimits(**settings)  # type: ignore[arg-type]


def test_an_agent_absent_from_the_map_gets_no_task_tool_and_children_get_none() -> None:
    agents = {"triage": echo_agent(), "researcher": echo_agent()}
    runtime = Runtime(agents, MemoryStore(), subagents={"triage": ["researcher", "researcher"]})
    assert runtime.subagents.targets("triage", depth=0) == ("researcher",)
    assert runtime.subagents.targets("researcher", depth=0) == ()
    assert runtime.subagents.targets("triage", depth=1) == ()  # at max_depth: no cycles


def test_deeper_nesting_is_opt_in() -> None:
    policy = SubagentPolicy.of({"a": ["a"]}, SubagentLimits(max_depth=3), ["a"])
    assert [policy.targets("a", depth=d) for d in range(4)] == [("a",), ("a",), ("a",), ()]


@pytest.mark.parametrize(
    "spawns", [{"triage": ["nobody"]}, {"ghost": ["researcher"]}, {"triage": "researcher"}]
)
def test_a_map_naming_unregistered_agents_is_refused(spawns: dict[str, object]) -> None:
    agents = {"triage": echo_agent(), "researcher": echo_agent()}
    with pytest.raises(ValueError, match="subagents"):
        Runtime(agents, MemoryStore(), subagents=spawns)


def test_a_description_is_routing_metadata_on_the_definition() -> None:
    definition = AgentDefinition(echo_agent().initialize, description="answers lookups")
    assert definition.description == "answers lookups"
    assert AgentDefinition(echo_agent().initialize).description is None
