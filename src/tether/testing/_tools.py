"""A tool executor for tests that behaves like a careful external system."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping

from pydantic import JsonValue

from tether.journal import ToolScope
from tether.messages import ToolCall, ToolResult

__all__ = ("RecordingTools",)

ToolFn = Callable[[ToolCall, ToolScope], Awaitable[JsonValue]]


class RecordingTools:
    """Runs tools from a mapping of async functions and records what happened.

    ``executions`` counts every run per idempotency key; ``effects`` holds the result of
    each key's first run, and a later run with the same key returns it without running the
    function again (durable deduplication, as an idempotent external API would).
    """

    def __init__(self, tools: Mapping[str, ToolFn] | None = None) -> None:
        self.tools = dict(tools or {})
        self.executions: Counter[str] = Counter()
        self.effects: dict[tuple[str, str], ToolResult] = {}
        self.calls: list[ToolCall] = []

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        self.calls.append(call)
        self.executions[scope.idempotency_key] += 1
        key = (scope.conversation_id, scope.idempotency_key)
        if key in self.effects:
            return self.effects[key]
        fn = self.tools.get(call.name)
        value = await fn(call, scope) if fn is not None else {"echo": call.args}
        result = ToolResult(call_id=call.call_id, content=str(value), data=value)
        self.effects[key] = result
        return result
