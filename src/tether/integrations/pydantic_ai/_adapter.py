"""A pydantic-ai ``Agent`` as a Tether harness: its model and tools go through the journal.

pydantic-ai keeps driving its loop. A per-run capability wraps the run's model and its
assembled toolset; every model request and tool call is journaled, so a resumed run is
served the recorded prefix and a replay makes zero model calls. Tools that pydantic-ai
would defer for approval (``requires_approval=True``) become Tether approvals: the run
parks until someone decides, then the approved call runs (with the approver's edited
arguments, if any) or the model is told it was denied.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai import messages as pa
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model as PAModel
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from tether.engine import AgentDefinition
from tether.integrations._bridge import (
    durable_definition,
    journaled_model,
    journaled_tool,
    tool_call,
    turn_scope,
)
from tether.integrations.pydantic_ai._convert import as_text, jsonable, neutral_request, to_response
from tether.journal import ToolScope, Turn
from tether.messages import (
    Mediation,
    Message,
    ModelResponse,
    ToolCall,
    ToolOutcomeStatus,
    ToolResult,
)
from tether.models import DeltaSink
from tether.models.pydantic_ai import complete, to_pydantic_ai

__all__ = ("PydanticAIHarness", "ToolFailed", "durable")

_RETRY = "pydantic_ai.retry"


class ToolFailed(RuntimeError):
    """A tool raised (journaled as an error outcome); raised again on resume and replay."""


class _JournaledModel(WrapperModel):
    async def request(
        self,
        messages: list[pa.ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> pa.ModelResponse:
        wrapped = self.wrapped
        name = wrapped.model_name
        name = name if ":" in name else f"{wrapped.system}:{name}"
        request = neutral_request(name, messages, model_settings, model_request_parameters)

        async def native(stream: DeltaSink | None) -> ModelResponse:
            return await complete(
                wrapped, messages, model_settings, model_request_parameters, stream
            )

        # Live or served, the agent continues from the journaled form: live equals replay.
        response = await journaled_model(request, native, provider=wrapped.system)
        return to_response(response, wrapped.model_name)


@dataclasses.dataclass
class _JournaledToolset(WrapperToolset[Any]):
    """Every call through the journal; approval-gated tools become Tether approvals."""

    idempotent: frozenset[str] = frozenset()
    approval: set[str] = dataclasses.field(default_factory=set)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        for name, tool in tools.items():
            if tool.tool_def.kind == "unapproved":
                # Tether gates the call itself, so pydantic-ai must not defer it.
                self.approval.add(name)
                function_def = dataclasses.replace(tool.tool_def, kind="function")
                tools[name] = dataclasses.replace(tool, tool_def=function_def)
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call = tool_call(
            ctx.tool_call_id or f"{name}:{ctx.run_step}",
            name,
            jsonable(tool_args),  # type: ignore[arg-type]
            mediation=Mediation.APPROVAL if name in self.approval else Mediation.HOST,
            idempotent=name in self.idempotent,
        )

        async def native(call: ToolCall, scope: ToolScope) -> ToolResult:
            try:
                value = await self.wrapped.call_tool(name, dict(call.args), ctx, tool)
            except ModelRetry as retry:
                return ToolResult(
                    call_id=call.call_id,
                    content=retry.message,
                    data=_RETRY,
                    is_error=True,
                    status=ToolOutcomeStatus.ERROR,
                )
            data = None if isinstance(value, str) else jsonable(value)
            return ToolResult(call_id=call.call_id, content=as_text(value), data=data)

        result = await journaled_tool(call, native)
        if result.status is ToolOutcomeStatus.ERROR:
            if result.data == _RETRY:
                raise ModelRetry(result.content)
            raise ToolFailed(f"{name}: {result.content}")
        # Denied and unknown outcomes are for the model to read; successes go back as
        # the journaled value, so the agent sees the same thing live and on replay.
        return result.content if result.data is None or result.is_error else result.data


@dataclasses.dataclass(init=False)
class _Journaled(AbstractCapability[Any]):
    def __init__(self, idempotent: frozenset[str]) -> None:
        self.idempotent = idempotent

    def get_wrapper_model(self, model: PAModel) -> PAModel | None:
        return _JournaledModel(model)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return _JournaledToolset(toolset, self.idempotent)


def _prompt(inputs: Sequence[Message]) -> str:
    return "\n\n".join(message.text for message in inputs if message.text)


class PydanticAIHarness:
    """Runs a pydantic-ai agent durably; ``run`` returns the output as JSON.

    The session's earlier messages are the agent's ``message_history``; this execution's
    input is its prompt. ``deps`` is passed to every run. ``idempotent_tools`` names the
    tools safe to run again under the same key after a crash interrupted them (their
    executor deduplicates); any other interrupted tool gets an ``unknown`` outcome.

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
    ) -> None:
        self.agent = agent
        self.idempotent_tools = frozenset(idempotent_tools)
        self.name = name or f"pydantic-ai:{agent.name or 'agent'}"
        self.version = version
        self.deps = deps

    async def run(self, turn: Turn) -> JsonValue:
        history = to_pydantic_ai(turn.history)
        with turn_scope(turn):
            try:
                result = await self.agent.run(
                    _prompt(turn.inputs),
                    message_history=history or None,
                    deps=self.deps,
                    capabilities=[_Journaled(self.idempotent_tools)],
                )
            except Exception:
                # A park or a divergence may surface wrapped by pydantic-ai; the turn's own
                # sticky failure is the one the engine must see.
                if turn.failure is not None:
                    raise turn.failure from None
                raise
        if turn.failure is not None:
            raise turn.failure
        return jsonable(result.output)


def durable(
    agent: Agent[Any, Any],
    *,
    name: str | None = None,
    version: str = "1",
    deps: Any = None,
    idempotent_tools: Sequence[str] = (),
    max_attempts: int | None = None,
    timeout: float | None = None,
) -> AgentDefinition:
    """A pydantic-ai agent as a durable Tether agent (for ``Runtime`` or ``tether serve --app``).

    Example::

        def agents():
            return {"support": durable(support_agent)}
    """
    harness = PydanticAIHarness(
        agent, name=name, version=version, deps=deps, idempotent_tools=idempotent_tools
    )
    return durable_definition(harness, max_attempts=max_attempts, timeout=timeout)
