"""The journaled clone of an agent graph: models, function tools and guardrails.

The agent is cloned (never mutated): its model becomes a :class:`JournaledModel`, each
``FunctionTool`` a journaled one, its MCP servers' tools a journaled listing of journaled
tools (``_mcp.py``) and each guardrail a serial one, recursively through handoffs.
Constructs that cannot be journaled are refused before anything runs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agents import Agent, FunctionTool, Handoff, Model, RunContextWrapper

from tether.integrations._bridge import policy_for
from tether.integrations.openai_agents._guardrails import serial_input, serial_output
from tether.integrations.openai_agents._mcp import journal_mcp_servers
from tether.integrations.openai_agents._model import JournaledModel
from tether.integrations.openai_agents._refuse import check_agent
from tether.integrations.openai_agents._scope import Scope, scope_of, set_scope
from tether.integrations.openai_agents._tools import journaled_tool_of

__all__ = ("clone_graph",)


def _has_tool_guardrails(agent: Agent[Any]) -> bool:
    return any(
        isinstance(t, FunctionTool) and (t.tool_input_guardrails or t.tool_output_guardrails)
        for t in agent.tools
    )


def clone_graph(agent: Agent[Any], scope: Scope) -> Agent[Any]:
    """A journaled clone of ``agent`` and of every agent it hands off to, all in ``scope``."""
    clones: dict[int, Agent[Any]] = {}

    def wrap(original: Agent[Any]) -> Agent[Any]:
        if scope_of(original) is not None:
            return original  # already a journaled clone
        known = clones.get(id(original))
        if known is not None:
            return known
        check_agent(original)
        scope.serial_tools = scope.serial_tools or _has_tool_guardrails(original)
        model = original.model if isinstance(original.model, Model | str) else None
        clone = original.clone(
            model=model if isinstance(model, JournaledModel) else JournaledModel(model),
            tools=[
                journaled_tool_of(
                    t,
                    scope.control,
                    idempotent=t.name in scope.idempotent,
                    policy=policy_for(t.name, scope.policies),
                )
                if isinstance(t, FunctionTool)
                else t
                for t in original.tools
            ],
            input_guardrails=[serial_input(g, scope.lock) for g in original.input_guardrails],
            output_guardrails=[serial_output(g, scope.lock) for g in original.output_guardrails],
        )
        if original.mcp_servers:
            journal_mcp_servers(clone, scope)
        set_scope(clone, scope)
        clones[id(original)] = clone  # before the handoffs: agents may hand off in a cycle
        clone.handoffs = [wrap_handoff(h) for h in original.handoffs]
        return clone

    def wrap_handoff(handoff: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | Handoff[Any, Any]:
        if isinstance(handoff, Agent):
            return wrap(handoff)
        invoke = handoff.on_invoke_handoff

        async def on_invoke(ctx: RunContextWrapper[Any], arguments: str) -> Agent[Any]:
            return wrap(await invoke(ctx, arguments))

        return dataclasses.replace(handoff, on_invoke_handoff=on_invoke)

    return wrap(agent)
