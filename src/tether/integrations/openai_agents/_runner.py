"""The SDK's default runner, made to journal the runs nested in a durable run.

``Runner.run`` / ``Runner.run_streamed`` hand their work to the SDK's default
``AgentRunner``. Tether installs one in front of it (it delegates to whichever was the
default) that changes nothing outside a journaled run. Inside one, a run of the user's own
agent (a guardrail's checker agent, say) is run as its journaled clone, in the enclosing
run's scope, so every model call the durable run makes is in the journal. Inside a journaled
tool nothing is changed: the tool's whole result is journaled (an agent used as a tool).
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from agents import Agent, Model, RunConfig, RunResult, RunResultStreaming, ToolExecutionConfig
from agents.items import TResponseInputItem
from agents.run import (
    AgentRunner,
    RunOptions,
    get_default_agent_runner,
    set_default_agent_runner,
)
from agents.run_context import TContext
from agents.run_state import RunState

from tether.integrations.openai_agents._clone import clone_graph
from tether.integrations.openai_agents._guardrails import serial_input, serial_output
from tether.integrations.openai_agents._model import JournaledModel
from tether.integrations.openai_agents._refuse import check_run_options
from tether.integrations.openai_agents._scope import Scope, current_scope, scope_of, within

__all__ = ("JournalingRunner", "install_runner")


def _run_config(value: object) -> RunConfig:
    if isinstance(value, RunConfig):
        return value
    if isinstance(value, dict):
        return RunConfig(**value)
    return RunConfig()


def _journaled_config(config: RunConfig, scope: Scope, nested: bool) -> RunConfig:
    """``config`` with its model journaled, its guardrails serial, and for a nested run the
    enclosing run's tracing setting (a checker agent's run reports to no SDK trace)."""
    changes: dict[str, Any] = {}
    if isinstance(config.model, Model | str) and not isinstance(config.model, JournaledModel):
        changes["model"] = JournaledModel(config.model)  # it overrides every agent's model
    if config.input_guardrails:
        changes["input_guardrails"] = [serial_input(g, scope.lock) for g in config.input_guardrails]
    if config.output_guardrails:
        changes["output_guardrails"] = [
            serial_output(g, scope.lock) for g in config.output_guardrails
        ]
    if scope.serial_tools:
        execution = config.tool_execution or ToolExecutionConfig()
        changes["tool_execution"] = dataclasses.replace(execution, max_function_tool_concurrency=1)
    if nested:
        changes["tracing_disabled"] = scope.tracing_disabled
    return dataclasses.replace(config, **changes) if changes else config


def _prepare(
    agent: Agent[Any], input: object, kwargs: dict[str, Any]
) -> tuple[Agent[Any], dict[str, Any], Scope | None]:
    """The agent and options to run, and the scope the run is in (``None``: not journaled)."""
    scope = scope_of(agent)
    nested = scope is None
    if scope is None:
        outer = current_scope()
        if outer is None:
            return agent, kwargs, None  # not inside a journaled run, or inside a journaled tool
        scope = Scope(
            control=outer.control,
            idempotent=outer.idempotent,
            policies=outer.policies,
            tracing_disabled=outer.tracing_disabled,
            responses=outer.responses,
        )
        agent = clone_graph(agent, scope)
    check_run_options(kwargs, input, scope.responses)
    config = _run_config(kwargs.get("run_config"))
    if not nested:
        scope.tracing_disabled = config.tracing_disabled
    options = {**kwargs, "run_config": _journaled_config(config, scope, nested)}
    return agent, options, scope


class JournalingRunner(AgentRunner):
    """The default runner while Tether's OpenAI Agents adapter is in use (see the module)."""

    def __init__(self, inner: AgentRunner) -> None:
        self.inner = inner

    async def run(
        self,
        starting_agent: Agent[TContext],
        input: str | list[TResponseInputItem] | RunState[TContext],
        **kwargs: Any,
    ) -> RunResult:
        agent, options, scope = _prepare(starting_agent, input, dict(kwargs))
        with within(scope if scope is not None else current_scope()):
            return await self.inner.run(agent, input, **cast(RunOptions[TContext], options))

    def run_streamed(
        self,
        starting_agent: Agent[TContext],
        input: str | list[TResponseInputItem] | RunState[TContext],
        **kwargs: Any,
    ) -> RunResultStreaming:
        agent, options, scope = _prepare(starting_agent, input, dict(kwargs))
        # The run's task is created here and copies the context (and so the scope) as it is.
        with within(scope if scope is not None else current_scope()):
            return self.inner.run_streamed(agent, input, **cast(RunOptions[TContext], options))

    def run_sync(
        self,
        starting_agent: Agent[TContext],
        input: str | list[TResponseInputItem] | RunState[TContext],
        **kwargs: Any,
    ) -> RunResult:
        return self.inner.run_sync(starting_agent, input, **cast(RunOptions[TContext], kwargs))


def install_runner() -> None:
    """Put a :class:`JournalingRunner` in front of the SDK's default runner (once; again if
    the application replaced the default since)."""
    default = get_default_agent_runner()
    if not isinstance(default, JournalingRunner):
        set_default_agent_runner(JournalingRunner(default))
