"""Agents that delegate (issue 21), for the HTTP tests: a parent whose model calls ``task``,
and a researcher child that may be held on a gate the test opens."""

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from tether.agent import ToolContext, agent_spec, tool
from tether.engine import AgentDefinition, SubagentLimits
from tether.messages import ModelRequest, ToolResultPart
from tether.models import ScriptedModel, ToolUse

WAIT = 60


def _last_tool_results(request: ModelRequest) -> list[str]:
    results: list[str] = []
    for message in reversed(request.messages):
        if message.role != "tool":
            break
        results[:0] = [p.content for p in message.parts if isinstance(p, ToolResultPart)]
    return results


def delegating(*prompts: str, agent: str = "researcher") -> ScriptedModel:
    """A parent model: its first answer calls ``task`` once per prompt (in parallel, as
    ``call-0``, ``call-1``...), its next one reports what the children said."""

    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return "Findings: " + " | ".join(_last_tool_results(request))
        return [
            ToolUse("task", {"agent": agent, "prompt": prompt}, call_id=f"call-{i}")
            for i, prompt in enumerate(prompts)
        ]

    return ScriptedModel(reply, chunk=8)


@dataclass
class Gate:
    """Holds every researcher in its ``hold`` tool until the test opens it."""

    opened: asyncio.Event = field(default_factory=asyncio.Event)
    entered: int = 0
    _entering: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def enter(self) -> None:
        async with self._entering:
            self.entered += 1
            self._entering.notify_all()

    async def until_entered(self, count: int = 1) -> None:
        async with asyncio.timeout(WAIT), self._entering:
            await self._entering.wait_for(lambda: self.entered >= count)


def researcher(gate: Gate | None = None) -> AgentDefinition:
    """A child: it calls ``hold`` first when there is a gate, then answers ``notes on X``."""

    @tool
    async def hold(ctx: ToolContext) -> str:
        """Wait for the test, saying so (progress) every 50 ms meanwhile."""
        assert gate is not None
        await gate.enter()
        async with asyncio.timeout(WAIT):
            while not gate.opened.is_set():
                await ctx.progress("holding")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gate.opened.wait(), 0.05)
        return "held"

    def reply(request: ModelRequest) -> object:
        last = request.messages[-1]
        if gate is not None and last.role == "user":
            return ToolUse("hold", {})
        prompt = next(m.text for m in request.messages if m.role == "user")
        return f"notes on {prompt}"

    model = ScriptedModel(reply, chunk=4)
    spec = agent_spec(model, tools=[hold] if gate is not None else [])
    return AgentDefinition(lambda instance, env: spec, description="answers lookups")


def team(*prompts: str, gate: Gate | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The agents (``assistant`` delegating ``prompts`` to ``researcher``) and the runtime
    settings that let it: ``serve(*team(...))`` needs ``settings=`` so use :func:`serving`."""
    parent = delegating(*prompts)
    spec = agent_spec(parent)
    agents = {
        "assistant": AgentDefinition(lambda instance, env: spec),
        "researcher": researcher(gate),
    }
    return agents, {"subagents": {"assistant": ["researcher"]}}


def nested_team() -> tuple[dict[str, Any], dict[str, Any]]:
    """Two levels: ``assistant`` asks ``researcher`` about tides, which asks ``librarian``."""
    parent, middle = (
        agent_spec(delegating("tides")),
        agent_spec(delegating("sources", agent="librarian")),
    )
    agents = {
        "assistant": AgentDefinition(lambda instance, env: parent),
        "researcher": AgentDefinition(lambda instance, env: middle, description="digs"),
        "librarian": researcher(),
    }
    settings = {
        "subagents": {"assistant": ["researcher"], "researcher": ["librarian"]},
        "subagent_limits": SubagentLimits(max_depth=2),
    }
    return agents, settings
