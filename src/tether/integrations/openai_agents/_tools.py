"""Journaled function tools: each invocation runs at most once per call id, approvals honoured."""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, cast

from agents import FunctionTool, RunContextWrapper
from agents.tool import (
    ToolErrorFunction,
    invoke_function_tool,
    resolve_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext
from pydantic import JsonValue

from tether.errors import TetherError
from tether.integrations._bridge import journaled_tool, tool_call
from tether.integrations.openai_agents._convert import jsonable
from tether.integrations.openai_agents._scope import outside_scope
from tether.journal import ToolFailure, ToolPolicy, ToolScope
from tether.messages import Mediation, ToolCall, ToolOutcomeStatus, ToolResult
from tether.stream import parse_tool_arguments

__all__ = ("journaled_tool_of",)

_failed: ContextVar[list[Exception] | None] = ContextVar("tether_openai_tool_failed", default=None)

_JOURNALED = "_tether_journaled"

NeedsApproval = bool | Callable[[RunContextWrapper[Any], dict[str, Any], str], Awaitable[bool]]


def _recording_failures(tool: FunctionTool) -> FunctionTool:
    """A copy of ``tool`` whose handled failures are kept (for ``is_error``, and for a tool
    policy to retry) and whose Tether control errors are never turned into a message for
    the model."""
    inner = tool.__copy__()
    original = resolve_function_tool_failure_error_function(tool)

    async def on_failure(ctx: RunContextWrapper[Any], error: Exception) -> str:
        if isinstance(error, TetherError):
            raise error
        failures = _failed.get()
        if failures is not None:
            failures.append(error)
        if original is None:
            raise error
        message = original(ctx, error)
        if inspect.isawaitable(message):
            message = await message
        return str(message)

    set_function_tool_failure_error_function(inner, cast(ToolErrorFunction, on_failure))
    return inner


def _result_of(call_id: str, output: object, failed: bool) -> ToolResult:
    status = ToolOutcomeStatus.ERROR if failed else ToolOutcomeStatus.OK
    if isinstance(output, str):
        return ToolResult(call_id=call_id, content=output, is_error=failed, status=status)
    data = jsonable(output)
    content = data if isinstance(data, str) else _json_text(data)
    return ToolResult(call_id=call_id, content=content, data=data, is_error=failed, status=status)


def _json_text(data: JsonValue) -> str:
    return json.dumps(data, ensure_ascii=False)


def journaled_tool_of(
    tool: FunctionTool,
    control: list[TetherError],
    *,
    idempotent: bool = False,
    policy: ToolPolicy | None = None,
) -> FunctionTool:
    """``tool`` with its invocation journaled; ``needs_approval`` becomes a Tether approval.
    An ``idempotent`` tool is run again after a crash cut it short (else its outcome is
    recorded as unknown). Under a ``policy``, a failure (what the SDK's failure function
    turns into a message) is retried, the message being the error the model reads once no
    attempt is left."""
    if getattr(tool.on_invoke_tool, _JOURNALED, False):
        return tool  # a tool of a journaled clone: journaled once is enough
    inner = _recording_failures(tool)
    needs_approval: NeedsApproval = tool.needs_approval

    async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
        args = parse_tool_arguments(arguments)
        mediation = Mediation.HOST
        if needs_approval is True or (
            callable(needs_approval) and await needs_approval(ctx, dict(args), ctx.tool_call_id)
        ):
            mediation = Mediation.APPROVAL

        async def native(call: ToolCall, scope: ToolScope) -> ToolResult:
            failures: list[Exception] = []
            token = _failed.set(failures)
            try:
                with outside_scope():  # an agent-as-tool's nested run is this call's result
                    output = await invoke_function_tool(
                        function_tool=inner, context=ctx, arguments=_json_text(call.args)
                    )
            finally:
                _failed.reset(token)
            if failures and policy is not None:
                raise ToolFailure(str(output)) from failures[-1]
            return _result_of(call.call_id, output, bool(failures))

        try:
            call = tool_call(
                ctx.tool_call_id, tool.name, args, mediation=mediation, idempotent=idempotent
            )
            result = await journaled_tool(call, native, policy=policy)
        except TetherError as exc:
            control.append(exc)  # the SDK wraps tool exceptions; the harness re-raises this
            raise
        # The journaled value, never the live object, so live and replay feed the model alike.
        return result.content if result.data is None else result.data

    setattr(invoke, _JOURNALED, True)
    return dataclasses.replace(
        tool, on_invoke_tool=invoke, needs_approval=False, timeout_seconds=None
    )
