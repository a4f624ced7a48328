"""Routing a framework's own model and tool calls through the journal.

A durable adapter swaps a framework's model and tools for journaled stand-ins. A stand-in
hands the journal two things: a neutral description of the call (hashed for I0 and recorded)
and the framework's own call, which the journal runs only when the call was never recorded
(the journal wraps it like its own clients, so tracing and interceptors see it too). The
turn of the run reaches the stand-ins through a context variable set by the harness.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar

from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec
from tether.errors import JournalError
from tether.journal import Harness, ToolPolicy, ToolScope, Turn
from tether.messages import Mediation, ModelRequest, ModelResponse, ToolCall, ToolResult
from tether.models import DeltaSink, ModelRetryPolicy

__all__ = (
    "NativeModelCall",
    "NativeToolCall",
    "NotInTurn",
    "current_turn",
    "durable_definition",
    "journaled_model",
    "journaled_tool",
    "policy_for",
    "step",
    "tool_call",
    "turn_scope",
)

NativeModelCall = Callable[[DeltaSink | None], Awaitable[ModelResponse]]
"""The framework's own model call, answering in Tether's terms (chunks go to the sink)."""
NativeToolCall = Callable[[ToolCall, ToolScope], Awaitable[ToolResult]]
"""The framework's own tool call; ``call.args`` may differ from the model's (an approver
edited them)."""

_turn: ContextVar[Turn | None] = ContextVar("tether_turn", default=None)


class NotInTurn(JournalError):
    """A journaled stand-in was called outside a durable run."""

    code = "not_in_turn"


@contextlib.contextmanager
def turn_scope(turn: Turn) -> Iterator[Turn]:
    """Makes ``turn`` the current one while a framework runs inside a harness."""
    token = _turn.set(turn)
    try:
        yield turn
    finally:
        _turn.reset(token)


def current_turn() -> Turn:
    """The turn of the durable run this code is part of (for stand-ins and durable steps)."""
    turn = _turn.get()
    if turn is None:
        raise NotInTurn(
            "a journaled model or tool was used outside a Tether run; run the agent through "
            "its tether.integrations adapter"
        )
    return turn


async def step(name: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
    """A durable step inside a framework run: ``fn`` runs once, recovery serves its value.

    Example::

        order_id = await step("create-order", lambda: shop.create_order(cart))
    """
    return await current_turn().step(name, fn)


class _NativeModel:
    def __init__(self, native: NativeModelCall, provider: str | None) -> None:
        self._native = native
        self.provider = provider
        """What a trace reports as the call's ``gen_ai.provider.name`` (see ``tether.otel``)."""

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        return await self._native(stream)


class _NativeTools:
    def __init__(self, native: NativeToolCall) -> None:
        self._native = native

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        return await self._native(call, scope)


async def journaled_model(
    request: ModelRequest, native: NativeModelCall, *, provider: str | None = None
) -> ModelResponse:
    """Ask the current turn's model: served from the log when recorded, else ``native`` runs.
    ``provider`` names the provider the framework's model calls (``openai``), for tracing."""
    return await current_turn().model(request, client=_NativeModel(native, provider))


async def journaled_tool(
    call: ToolCall, native: NativeToolCall, *, policy: ToolPolicy | None = None
) -> ToolResult:
    """Run a tool through the current turn: at most once per key, approvals honoured, each
    attempt bounded and a failed one retried as ``policy`` says (an exception ``native``
    raises is a failed attempt)."""
    return await current_turn().tool(call, executor=_NativeTools(native), policy=policy)


def policy_for(name: str, policies: Mapping[str, ToolPolicy]) -> ToolPolicy | None:
    """A tool's policy in an adapter's ``tool_policies``: its own entry, else ``"*"``'s."""
    return policies.get(name) or policies.get("*")


def tool_call(
    call_id: str,
    name: str,
    args: dict[str, JsonValue],
    *,
    mediation: Mediation = Mediation.HOST,
    idempotent: bool = False,
    metadata: dict[str, JsonValue] | None = None,
) -> ToolCall:
    """A framework's tool call as the journal's. The key derives from recorded values (the
    execution and the model's call id), so a resume or a replay derives the same one.
    ``metadata`` goes with a gated call's approval or input request."""
    turn = current_turn()
    return ToolCall(
        call_id=call_id,
        name=name,
        args=args,
        idempotency_key=f"{turn.execution_id}:{call_id}",
        mediation=mediation,
        idempotent=idempotent,
        metadata=metadata,
    )


def durable_definition(
    harness: Harness,
    *,
    max_attempts: int | None = None,
    timeout: float | None = None,
    model_timeout: float | None = None,
    model_retry: ModelRetryPolicy | None = None,
) -> AgentDefinition:
    """An engine definition running ``harness``, whose stand-ins bring the framework's calls.
    ``model_timeout`` and ``model_retry`` bound and retry each of the framework's model
    calls (the runtime's policy when ``None``; see :class:`~tether.engine.AgentSpec`)."""
    # Every call brings its own client or executor.
    spec = AgentSpec(harness=harness, model_timeout=model_timeout, model_retry=model_retry)
    return AgentDefinition(lambda instance, env: spec, max_attempts=max_attempts, timeout=timeout)
