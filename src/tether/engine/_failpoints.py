"""The failpoints of an attempt's effects: ``model.request`` before each model call and
``tool.call`` before each host-mediated tool call (docs/testing.md).

An attempt wraps its model client and tool executor in these, innermost (inside the
instrumentation, the limits and the budgets), only when failpoints are armed as it starts:
otherwise nothing of this runs. A model ``error`` is the failure a provider's 500 ends a
model call with (a :class:`~tether.errors.ProviderError`, status 500, as the model layer
raises it once its retries are spent); a tool ``error`` is a ``ConnectionError``, as a tool
whose service dropped it raises.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from tether._failpoints import hit
from tether.errors import ProviderError
from tether.journal import ToolExecutor, ToolScope
from tether.messages import ModelRequest, ModelResponse, ToolCall, ToolResult
from tether.models import DeltaSink, Model

__all__ = ("FailpointModel", "FailpointTools", "provider_failure", "tool_failure")

Sleep = Callable[[float], Awaitable[None]]


def provider_failure(name: str) -> BaseException:
    """A provider's 500, as the model layer raises it."""
    return ProviderError(
        f"the provider answered HTTP 500: internal server error (failpoint {name})", status=500
    )


def tool_failure(name: str) -> BaseException:
    """A tool whose service dropped the connection."""
    return ConnectionError(f"connection reset by peer (failpoint {name})")


class FailpointModel:
    """A model client that reaches ``model.request`` before each call."""

    def __init__(self, inner: Model, sleep: Sleep) -> None:
        self._inner = inner
        self._sleep = sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        await hit("model.request", error=provider_failure, sleep=self._sleep)
        return await self._inner.request(request, stream)


class FailpointTools:
    """A tool executor that reaches ``tool.call`` before each call."""

    def __init__(self, inner: ToolExecutor, sleep: Sleep) -> None:
        self._inner = inner
        self._sleep = sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        await hit("tool.call", error=tool_failure, sleep=self._sleep)
        return await self._inner.execute(call, scope)
