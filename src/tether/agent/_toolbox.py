"""The tool executor for the built-in agent: runs ``Tool``s, turning every failure into a
result the model can read (never a crash of the run; a journal error, a divergence or a
park, is the run's and passes). A tool that raised is a :class:`~tether.journal.ToolFailure`
for the journal, which retries it if the call's policy says so, else reads it as the error
result; a call that cannot run (an unknown tool, arguments that do not fit) is an error
result at once, as no attempt would fare better."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from pydantic import JsonValue

from tether.agent._tools import Tool, ToolArgumentsError, ToolContext
from tether.errors import JournalError
from tether.journal import ToolFailure, ToolScope
from tether.messages import ToolCall, ToolOutcomeStatus, ToolResult

__all__ = ("Toolbox",)


class Toolbox:
    """A :class:`~tether.journal.ToolExecutor` over a set of tools."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self.tools = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            raise ValueError("tool names must be unique")

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        found = self.tools.get(call.name)
        if found is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return _error(call, f"unknown tool {call.name!r}; the tools are: {known}")
        context = ToolContext(
            call_id=call.call_id,
            idempotency_key=scope.idempotency_key,
            conversation_id=scope.conversation_id,
            session=scope.session,
            execution_id=scope.execution_id,
            scope=scope,
            progress_sink=scope.progress,
            identity=scope.identity,
        )
        try:
            value = await found.call(call.args, context)
        except ToolArgumentsError as exc:
            return _error(call, str(exc))
        except JournalError:
            raise  # a divergence, a park: the run's, not the tool's, to report
        except Exception as exc:
            raise ToolFailure(f"{call.name} failed: {type(exc).__name__}: {exc}") from exc
        return _result(call, value)


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(
        call_id=call.call_id, content=message, is_error=True, status=ToolOutcomeStatus.ERROR
    )


def _result(call: ToolCall, value: object) -> ToolResult:
    if isinstance(value, ToolResult):  # a tool that says its status itself (an MCP call's)
        return value.model_copy(update={"call_id": call.call_id})
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")  # a pydantic model
    try:
        data: JsonValue = orjson.loads(orjson.dumps(value))
    except TypeError:
        return _error(call, f"{call.name} returned a {type(value).__name__}, which is not JSON")
    if isinstance(data, str):  # the text is the whole result: stored once, not twice
        return ToolResult(call_id=call.call_id, content=data)
    return ToolResult(call_id=call.call_id, content=orjson.dumps(data).decode(), data=data)
