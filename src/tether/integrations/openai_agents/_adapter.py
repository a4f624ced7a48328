"""Running an Agents SDK agent as a Tether harness: its model and function tools journaled.

The agent is cloned (never mutated): its model becomes a :class:`JournaledModel` and each
``FunctionTool`` a journaled one, recursively through handoffs; runs nested in a durable run
(a guardrail's checker agent) are journaled too (see ``_runner``). The SDK keeps driving its
own loop; the journal decides whether a call runs or is served from the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agents import Agent, RunConfig, Runner
from pydantic import JsonValue

from tether.engine import AgentDefinition
from tether.errors import TetherError
from tether.integrations._bridge import durable_definition, turn_scope
from tether.integrations.openai_agents._clone import clone_graph
from tether.integrations.openai_agents._convert import jsonable, messages_to_items
from tether.integrations.openai_agents._refuse import UnsupportedConstruct, check_run_options
from tether.integrations.openai_agents._runner import install_runner
from tether.integrations.openai_agents._scope import Scope
from tether.journal import ToolPolicy, Turn
from tether.models import ModelRetryPolicy

__all__ = ("OpenAIAgentsHarness", "durable", "journaled_agent")


def journaled_agent(
    agent: Agent[Any],
    control: list[TetherError] | None = None,
    *,
    idempotent_tools: Iterable[str] = (),
    tool_policies: Mapping[str, ToolPolicy] | None = None,
) -> Agent[Any]:
    """A clone of ``agent`` (and of every agent it hands off to) with a journaled model,
    journaled function tools and guardrails that run one at a time before the model call.
    ``agent`` itself is left untouched. ``control`` collects the Tether control errors
    (parks, divergences) a tool raised, which the SDK wraps. ``tool_policies`` bounds each
    function tool's calls and retries a failed one, by tool name (``"*"``: any other; see
    :class:`~tether.journal.ToolPolicy`). Raises
    :class:`UnsupportedConstruct` for what cannot be journaled (MCP servers, local shell,
    computer and patch tools...).

    Example::

        clone = journaled_agent(support)
        with turn_scope(turn):
            result = await Runner.run(clone, turn.inputs[-1].text)
    """
    install_runner()  # nested runs (a guardrail's checker agent) are journaled too
    scope = Scope(
        control=control if control is not None else [],
        idempotent=frozenset(idempotent_tools),
        policies=dict(tool_policies or {}),
    )
    return clone_graph(agent, scope)


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
        session: object = None,
        tool_policies: Mapping[str, ToolPolicy] | None = None,
    ) -> None:
        check_run_options({"session": session}, None)
        journaled_agent(agent)  # refuses at registration what cannot be journaled
        self.name = name or agent.name
        self.idempotent_tools = tuple(idempotent_tools)
        self.tool_policies = dict(tool_policies or {})
        self.version = version
        self.agent = agent
        self.max_turns = max_turns
        self.context = context

    async def run(self, turn: Turn) -> JsonValue:
        control: list[TetherError] = []
        agent = journaled_agent(
            self.agent,
            control,
            idempotent_tools=self.idempotent_tools,
            tool_policies=self.tool_policies,
        )
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
        if result.interruptions:
            names = ", ".join(sorted({i.tool_name or "?" for i in result.interruptions}))
            raise UnsupportedConstruct(
                f"the run stopped for the SDK's own approval of {names}; a durable run parks "
                "for Tether approvals (function tools with needs_approval) instead"
            )
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
    session: object = None,
    tool_policies: Mapping[str, ToolPolicy] | None = None,
    model_timeout: float | None = None,
    model_retry: ModelRetryPolicy | None = None,
) -> AgentDefinition:
    """An engine definition running ``agent`` durably (its model and function tools journaled).
    ``tool_policies`` bounds and retries its function tools' calls (see
    :func:`journaled_agent`); ``model_timeout`` and ``model_retry`` its model calls' (the
    runtime's when ``None``).

    ``session`` is refused (:class:`UnsupportedConstruct`): the Tether session log is the
    agent's memory. So is any construct the journal cannot hold (see ``journaled_agent``).

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
        session=session,
        tool_policies=tool_policies,
    )
    return durable_definition(
        harness,
        max_attempts=max_attempts,
        timeout=timeout,
        model_timeout=model_timeout,
        model_retry=model_retry,
    )
