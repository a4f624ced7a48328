"""A pydantic-ai agent whose every run is journaled, however it is driven.

pydantic-ai funnels ``run``, ``run_stream``, ``run_stream_events`` and ``run_sync`` into
``iter``; :class:`JournaledAgent` overrides ``iter`` to add a per-run capability that wraps
the run's model (:class:`~tether.integrations.pydantic_ai.JournaledModel`) and its assembled
toolset, so a harness may drive the agent any of those ways and stay durable.

Other agents a durable run starts outside its tools (a checker in an output validator, a
summarizer in a history processor, the agent itself run by a drive) must be journaled too,
and pydantic-ai has no hook for every run the way the OpenAI Agents SDK has its default
runner: Tether installs one in ``Agent.iter`` (and the realtime session openers) that
changes nothing outside a durable run; inside one, outside its tools, it adds the same
capability to a run that does not have it. Realtime sessions do not go through ``iter``
(nor through a journalable model) and are refused there.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, NoReturn

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.agent import AbstractAgent, WrapperAgent
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.models import Model as PAModel
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.run import AgentRun
from pydantic_ai.toolsets import AbstractToolset

from tether.integrations._bridge import current_turn
from tether.integrations.pydantic_ai._mcp import McpPolicy, journal_mcp
from tether.integrations.pydantic_ai._model import (
    JournaledModel,
    NotJournaled,
    UnsupportedConstruct,
    in_run,
    in_tool,
    inside_run,
)
from tether.integrations.pydantic_ai._tools import JournaledToolset, resolve_deferred
from tether.journal import ToolPolicy

__all__ = ("JournaledAgent", "check_journalable", "install", "journaled_agent")


@dataclasses.dataclass(init=False)
class _Journaled(AbstractCapability[Any]):
    def __init__(
        self,
        idempotent: frozenset[str],
        policies: Mapping[str, ToolPolicy] | None = None,
        mcp: McpPolicy | None = None,
    ) -> None:
        self.idempotent = idempotent
        self.policies = policies or {}
        self.mcp = mcp or McpPolicy()

    def get_ordering(self) -> CapabilityOrdering:
        # Outermost, so the other capabilities' request hooks see the journaled model.
        return CapabilityOrdering(position="outermost")

    def get_wrapper_model(self, model: PAModel) -> PAModel | None:
        return None if isinstance(model, JournaledModel) else JournaledModel(model)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        # pydantic-ai wraps the serving model only after the request hooks ran: a hook that
        # asks the model itself (a compaction) must find the journaled one already.
        request_context.model = (
            self.get_wrapper_model(request_context.model) or request_context.model
        )
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        return await self.before_model_request(ctx, request_context)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return JournaledToolset(journal_mcp(toolset, self.mcp), self.idempotent, self.policies)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        return await resolve_deferred(requests)


def check_journalable(agent: AbstractAgent[Any, Any]) -> None:
    """Refuse, when the agent is registered, what a Tether journal cannot stand in for."""
    try:
        from pydantic_ai.capabilities.abstract import leaf_capabilities
        from pydantic_ai.durable_exec import BaseDurabilityCapability
    except ImportError:  # an older pydantic-ai: no durability capabilities to clash with
        return
    for capability in leaf_capabilities(agent.root_capability):
        if isinstance(capability, BaseDurabilityCapability):
            raise UnsupportedConstruct(
                f"{type(capability).__name__}: the agent is already made durable by another "
                "engine; a Tether durable agent must not carry a pydantic-ai durability "
                "capability"
            )


class JournaledAgent(WrapperAgent[Any, Any]):
    """``agent`` with every run journaled in the current Tether turn: its model requests
    (plain or streamed) and its tool calls, with approvals and external tools as gates.
    ``run``, ``iter``, ``run_stream`` and ``run_stream_events`` all work; ``deps`` is the
    default of every run. Run outside a Tether turn it raises ``NotInTurn``; inside one of
    the durable run's tools it is the plain agent (the tool's outcome is what is recorded).
    What a drive gets; a harness of your own wraps its agent in one, inside ``turn_scope``.

    Example::

        async def drive(agent, prompt, history):          # durable(support, drive=drive)
            async with agent.run_stream(prompt, message_history=history) as result:
                async for text in result.stream_text(delta=True):
                    ...
                return await result.get_output()
    """

    def __init__(
        self,
        wrapped: AbstractAgent[Any, Any],
        *,
        idempotent_tools: Iterable[str] = (),
        deps: Any = None,
        tool_policies: Mapping[str, ToolPolicy] | None = None,
        mcp: McpPolicy | None = None,
    ) -> None:
        super().__init__(wrapped)
        self.idempotent_tools = frozenset(idempotent_tools)
        self.deps = deps
        self.tool_policies = dict(tool_policies or {})
        self.mcp = mcp or McpPolicy()

    @contextlib.asynccontextmanager
    async def iter(
        self, user_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[AgentRun[Any, Any]]:
        if in_tool():  # a tool's own effect: its outcome is journaled, not its insides
            async with self.wrapped.iter(user_prompt, **kwargs) as run:
                yield run
            return
        current_turn()  # outside a Tether run: refused before anything is asked
        if kwargs.get("deps") is None:
            kwargs["deps"] = self.deps
        capabilities = [
            *(kwargs.pop("capabilities", None) or ()),
            _Journaled(self.idempotent_tools, self.tool_policies, self.mcp),
        ]
        with inside_run():
            async with self.wrapped.iter(user_prompt, capabilities=capabilities, **kwargs) as run:
                yield run

    def _open_realtime_session(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_realtime()

    def _resolve_realtime_session(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse_realtime()


def install() -> None:
    """Journal the agent runs a durable run starts outside its tools (see the module)."""
    if getattr(Agent.iter, "_tether_journals", False):
        return
    iter_of, opened, resolved = (
        Agent.iter,
        Agent._open_realtime_session,
        Agent._resolve_realtime_session,
    )

    def journaling_iter(self: Agent[Any, Any], user_prompt: Any = None, **kwargs: Any) -> Any:
        capabilities = list(kwargs.pop("capabilities", None) or ())
        if in_run() and not any(isinstance(c, _Journaled) for c in capabilities):
            capabilities.append(_Journaled(frozenset()))
        return iter_of(self, user_prompt, capabilities=capabilities or None, **kwargs)

    def guarded(opener: Any) -> Any:
        def open_session(self: Agent[Any, Any], *args: Any, **kwargs: Any) -> Any:
            if in_run():
                _refuse_realtime()
            return opener(self, *args, **kwargs)

        return open_session

    journaling_iter._tether_journals = True  # type: ignore[attr-defined]
    setattr(Agent, "iter", journaling_iter)  # noqa: B010 - a method, assigned
    setattr(Agent, "_open_realtime_session", guarded(opened))  # noqa: B010
    setattr(Agent, "_resolve_realtime_session", guarded(resolved))  # noqa: B010


def _refuse_realtime() -> NoReturn:
    raise NotJournaled(
        "realtime sessions stream audio over a provider socket the journal cannot record; "
        "run a durable agent with run, iter, run_stream or run_stream_events"
    )


def journaled_agent(
    agent: Agent[Any, Any] | AbstractAgent[Any, Any],
    *,
    idempotent_tools: Iterable[str] = (),
    deps: Any = None,
    tool_policies: Mapping[str, ToolPolicy] | None = None,
    mcp: McpPolicy | None = None,
) -> JournaledAgent:
    """``agent`` journaled in the current Tether turn (see :class:`JournaledAgent`), for a
    harness of your own. (Inside a durable run, any other agent run outside its tools, a
    checker in an output validator say, is journaled without it; wrap one to name its
    ``idempotent_tools``, ``tool_policies`` and ``mcp``, the :class:`McpPolicy` of its
    MCP toolsets.)

    Example::

        class Support:                                   # a Tether harness
            name, version = "support", "1"

            async def run(self, turn):
                with turn_scope(turn):
                    async with journaled_agent(agent).iter(turn.inputs[-1].text) as run:
                        async for node in run:
                            ...
                return run.result.output
    """
    check_journalable(agent)
    if isinstance(agent, JournaledAgent):
        return agent
    return JournaledAgent(
        agent,
        idempotent_tools=idempotent_tools,
        deps=deps,
        tool_policies=tool_policies,
        mcp=mcp,
    )


install()
