"""Running an Agents SDK agent as a Tether harness: its model and function tools journaled.

The agent is cloned (never mutated): its model becomes a :class:`JournaledModel` and each
``FunctionTool`` a journaled one, recursively through handoffs. The SDK keeps driving its own
loop; the journal decides whether a call runs or is served from the log.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from agents import Agent, FunctionTool, Handoff, Model, RunConfig, RunContextWrapper, Runner
from pydantic import JsonValue

from tether.engine import AgentDefinition
from tether.errors import TetherError
from tether.integrations._bridge import durable_definition, turn_scope
from tether.integrations.openai_agents._convert import jsonable, messages_to_items
from tether.integrations.openai_agents._model import JournaledModel
from tether.integrations.openai_agents._tools import journaled_tool_of
from tether.journal import Turn

__all__ = ("OpenAIAgentsHarness", "durable", "journaled_agent")


def journaled_agent(
    agent: Agent[Any],
    control: list[TetherError] | None = None,
    *,
    idempotent_tools: Iterable[str] = (),
) -> Agent[Any]:
    """A clone of ``agent`` (and of every agent it hands off to) with a journaled model and
    journaled function tools. ``agent`` itself is left untouched. ``control`` collects the
    Tether control errors (parks, divergences) a tool raised, which the SDK wraps."""
    errors = control if control is not None else []
    idempotent = frozenset(idempotent_tools)
    clones: dict[int, Agent[Any]] = {}

    def wrap(original: Agent[Any]) -> Agent[Any]:
        known = clones.get(id(original))
        if known is not None:
            return known
        model = original.model if isinstance(original.model, Model | str) else None
        clone = original.clone(
            model=model if isinstance(model, JournaledModel) else JournaledModel(model),
            tools=[
                journaled_tool_of(t, errors, idempotent=t.name in idempotent)
                if isinstance(t, FunctionTool)
                else t
                for t in original.tools
            ],
        )
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


def final_json(output: object) -> JsonValue:
    """An agent's final output as JSON (text stays text)."""
    return output if isinstance(output, str) else jsonable(output)


class OpenAIAgentsHarness:
    """A Tether harness running an Agents SDK agent with ``Runner.run``."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        name: str | None = None,
        version: str = "1",
        max_turns: int = 10,
        context: object = None,
        idempotent_tools: Iterable[str] = (),
    ) -> None:
        self.name = name or agent.name
        self.idempotent_tools = tuple(idempotent_tools)
        self.version = version
        self.agent = agent
        self.max_turns = max_turns
        self.context = context

    async def run(self, turn: Turn) -> JsonValue:
        control: list[TetherError] = []
        agent = journaled_agent(self.agent, control, idempotent_tools=self.idempotent_tools)
        items = messages_to_items([*turn.history, *turn.inputs])
        with turn_scope(turn):
            try:
                result = await Runner.run(
                    agent,
                    items,
                    context=self.context,
                    max_turns=self.max_turns,
                    run_config=RunConfig(tracing_disabled=True),
                )
            except Exception as exc:
                if turn.failure is not None:
                    raise turn.failure from exc
                if control:
                    raise control[0] from exc
                raise
        if turn.failure is not None:
            raise turn.failure
        return final_json(result.final_output)


def durable(
    agent: Agent[Any],
    *,
    name: str | None = None,
    version: str = "1",
    max_turns: int = 10,
    idempotent_tools: Iterable[str] = (),
    context: object = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
) -> AgentDefinition:
    """An engine definition running ``agent`` durably (its model and function tools journaled).

    Example::

        def agents():
            return {"support": durable(support_agent)}   # tether serve --app myapp:agents
    """
    harness = OpenAIAgentsHarness(
        agent,
        name=name,
        version=version,
        max_turns=max_turns,
        context=context,
        idempotent_tools=idempotent_tools,
    )
    return durable_definition(harness, max_attempts=max_attempts, timeout=timeout)
