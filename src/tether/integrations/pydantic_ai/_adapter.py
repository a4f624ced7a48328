"""A pydantic-ai ``Agent`` as a Tether harness: its model and tools go through the journal.

pydantic-ai keeps driving its loop. Each run gets a capability that wraps the run's model
and its assembled toolset (see :class:`JournaledAgent`); every model request, plain or
streamed, and every tool call is journaled, so a resumed run is served the recorded prefix
and a replay makes zero model calls. The harness runs ``agent.run`` unless it is given a
``drive``: a function of the journaled agent, the prompt and the history that may run it
with ``iter``, ``run_stream`` or ``run_stream_events`` instead. Tools that pydantic-ai
would defer (``requires_approval=True``, ``ApprovalRequired``, external tools,
``CallDeferred``) become Tether approvals and inputs: the run parks until someone decides
or answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import JsonValue
from pydantic_ai import Agent
from pydantic_ai import messages as pa

from tether.engine import AgentDefinition
from tether.integrations._bridge import durable_definition, turn_scope
from tether.integrations.pydantic_ai._agent import JournaledAgent, check_journalable
from tether.integrations.pydantic_ai._convert import jsonable
from tether.integrations.pydantic_ai._mcp import McpPolicy
from tether.integrations.pydantic_ai._model import inside_run
from tether.integrations.pydantic_ai._tools import ToolFailed, gated_history
from tether.journal import ToolPolicy, Turn
from tether.messages import Message
from tether.models import ModelRetryPolicy
from tether.models.pydantic_ai import to_pydantic_ai

__all__ = ("Drive", "PydanticAIHarness", "ToolFailed", "durable")

Drive = Callable[[JournaledAgent, str, list[pa.ModelMessage]], Awaitable[Any]]
"""How the harness runs the agent: ``drive(agent, prompt, history)`` returns the output.
``agent`` is journaled whichever way it is run (so is any other agent the drive runs);
``history`` is the session's messages."""


async def _run(agent: JournaledAgent, prompt: str, history: list[pa.ModelMessage]) -> Any:
    return (await agent.run(prompt, message_history=history or None)).output


def _prompt(inputs: Sequence[Message]) -> str:
    return "\n\n".join(message.text for message in inputs if message.text)


class PydanticAIHarness:
    """Runs a pydantic-ai agent durably; ``run`` returns the output as JSON.

    The session's earlier messages are the agent's ``message_history``; this execution's
    input is its prompt. ``deps`` is passed to every run. ``idempotent_tools`` names the
    tools safe to run again under the same key after a crash interrupted them (their
    executor deduplicates); any other interrupted tool gets an ``unknown`` outcome.
    ``tool_policies`` bounds each tool's calls and retries a failed one, by tool name
    (``"*"``: any other; see :class:`~tether.journal.ToolPolicy`). ``mcp`` says which tools
    of the agent's MCP toolsets wait for an approval and which are idempotent (see
    :class:`McpPolicy`; by default, from the servers' annotations).
    ``drive`` runs the agent another way than ``agent.run`` (see :data:`Drive`).

    Example::

        harness = PydanticAIHarness(Agent("openai:gpt-4o", tools=[lookup]), version="2")
    """

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        name: str | None = None,
        version: str = "1",
        deps: Any = None,
        idempotent_tools: Sequence[str] = (),
        drive: Drive | None = None,
        tool_policies: Mapping[str, ToolPolicy] | None = None,
        mcp: McpPolicy | None = None,
    ) -> None:
        check_journalable(agent)
        self.agent = agent
        self.idempotent_tools = frozenset(idempotent_tools)
        self.tool_policies = dict(tool_policies or {})
        self.mcp = mcp or McpPolicy()
        self.name = name or f"pydantic-ai:{agent.name or 'agent'}"
        self.version = version
        self.deps = deps
        self.drive: Drive = drive or _run

    async def run(self, turn: Turn) -> JsonValue:
        history = to_pydantic_ai(gated_history(turn.history))
        agent = JournaledAgent(
            self.agent,
            idempotent_tools=self.idempotent_tools,
            deps=self.deps,
            tool_policies=self.tool_policies,
            mcp=self.mcp,
        )
        with turn_scope(turn), inside_run():
            try:
                output = await self.drive(agent, _prompt(turn.inputs), history)
            except Exception:
                # A park or a divergence may surface wrapped by pydantic-ai (or an exception
                # group); the turn's own sticky failure is the one the engine must see.
                if turn.failure is not None:
                    raise turn.failure from None
                raise
        if turn.failure is not None:
            raise turn.failure
        return jsonable(output)


def durable(
    agent: Agent[Any, Any],
    *,
    name: str | None = None,
    version: str = "1",
    deps: Any = None,
    idempotent_tools: Sequence[str] = (),
    drive: Drive | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    tool_policies: Mapping[str, ToolPolicy] | None = None,
    model_timeout: float | None = None,
    model_retry: ModelRetryPolicy | None = None,
    mcp: McpPolicy | None = None,
) -> AgentDefinition:
    """A pydantic-ai agent as a durable Tether agent (for ``Runtime`` or ``tether serve --app``).
    ``tool_policies`` bounds and retries its tools' calls (see :class:`PydanticAIHarness`);
    ``model_timeout`` and ``model_retry`` its model calls' (the runtime's when ``None``);
    ``mcp`` its MCP toolsets' approvals and idempotence (see :class:`McpPolicy`).

    Example::

        def agents():
            return {"support": durable(support_agent,
                                       tool_policies={"lookup": ToolPolicy(retries=3)})}
    """
    harness = PydanticAIHarness(
        agent,
        name=name,
        version=version,
        deps=deps,
        idempotent_tools=idempotent_tools,
        drive=drive,
        tool_policies=tool_policies,
        mcp=mcp,
    )
    return durable_definition(
        harness,
        max_attempts=max_attempts,
        timeout=timeout,
        model_timeout=model_timeout,
        model_retry=model_retry,
    )
