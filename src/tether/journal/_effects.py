"""What a journal needs around a harness: tool executors, observers, wrappers, and the two
small values that say who writes (``Stamp``) and what the host attaches (``JournalHooks``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol, runtime_checkable

from pydantic import JsonValue

from tether.messages import ToolCall, ToolResult
from tether.models import Model, ModelCallPolicy, RetryClock, StreamDelta
from tether.records import Actor, Record, SteerReceived, TaskFinished, TaskSpawned

__all__ = (
    "NO_HOOKS",
    "NO_STAMP",
    "Delegation",
    "EffectWrappers",
    "JournalHooks",
    "JournalObserver",
    "Stamp",
    "SteerSource",
    "ToolExecutor",
    "ToolScope",
)


@dataclass(frozen=True, slots=True)
class ToolScope:
    """What a tool executor gets besides the call: where it runs, how to deduplicate, and
    ``step`` for durable steps (recorded once, served again on recovery)."""

    conversation_id: str
    session: str
    execution_id: str
    idempotency_key: str
    step: Callable[[str, Callable[[], Awaitable[JsonValue]]], Awaitable[JsonValue]]
    progress: Callable[[str], Awaitable[None]] | None = None
    identity: Actor | None = None
    """Who asked for the execution (``Turn.identity``)."""
    sleep: Callable[[datetime | timedelta], Awaitable[None]] | None = None
    """A durable sleep inside the call, until a time or for a while (as ``Turn.sleep``):
    the execution parks until then, and a tool declared idempotent is run again once it
    wakes, its steps and this sleep served from the log (the built-in agent's
    ``wait_until`` tool)."""


@runtime_checkable
class ToolExecutor(Protocol):
    """Runs host-mediated tools. It must deduplicate on ``scope.idempotency_key`` if a tool
    is declared idempotent: recovery may call it again with the same key."""

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult: ...


class JournalObserver(Protocol):
    """Hooks for streaming: ``on_record`` after each durable append, ``on_delta`` per chunk.

    Deltas are never effects: replay emits none. A failing observer never fails a run.
    An observer may also define ``async on_progress(execution_id, call_id, text)`` for the
    partial output tools report, and ``on_commit(operation, seconds)`` (not async) to hear
    how long each append's commit took (``append`` or ``append_settled``).
    """

    async def on_record(self, records: Sequence[Record]) -> None: ...

    async def on_delta(self, execution_id: str, call_id: str, delta: StreamDelta) -> None: ...


@dataclass(frozen=True, slots=True)
class EffectWrappers:
    """How the host wraps every model client and tool executor a journal invokes (tracing,
    interceptors): the journal's own and any a harness hands to a single call."""

    model: Callable[[Model], Model]
    tools: Callable[[ToolExecutor], ToolExecutor]


@runtime_checkable
class Delegation(Protocol):
    """Runs task calls (``Mediation.TASK``) as child submissions: the host's side of
    :meth:`Turn.delegate`. The journal records the call, the spawn and the answer; a
    delegation decides whether a call may spawn, admits its child, and reads its end.

    A spawn must be idempotent per ``call.idempotency_key``: recovery re-drives one that a
    crash cut before its ``task_spawned`` record, and must get the same child back.
    """

    async def refuse(self, call: ToolCall) -> str | None:
        """Why a new task call gets an error result at once (a limit reached, an agent it may
        not spawn, arguments that do not fit), or ``None`` to spawn it."""
        ...

    async def spawn(self, call: ToolCall, intent: Record) -> TaskSpawned | str:
        """Admit the child of the call whose ``tool_called`` record is ``intent``, or say
        why the call is refused after all (a limit that only admission can check exactly:
        the call then gets an error result at once, like a refusal)."""
        ...

    async def answer(self, spawned: Record) -> tuple[TaskFinished, ToolResult] | None:
        """The child's end, as the parent records it and as the model reads it, once it
        has settled (or its wait has lapsed); ``None`` while it still runs."""
        ...

    async def delivered(self, finished: Record) -> None:
        """The answer's ``task_finished`` record is durable in the parent's log (what was
        given up on, a child whose wait lapsed, may be cancelled now)."""
        ...


SteerSource = Callable[[tuple[str, ...]], Awaitable[Sequence[SteerReceived]]]
"""Called with the modes a safe point accepts; returns the messages to deliver there."""


def _unchanged(text: str) -> str:
    return text


@dataclass(frozen=True, slots=True)
class Stamp:
    """Who writes: the ids stamped on every record a journal appends (an engine's claim)."""

    submission_id: str | None = None
    attempt_id: str | None = None


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class JournalHooks:
    """What a host attaches to a journal's live executions.

    ``observer`` hears appends, deltas and tool progress; ``steer_source`` delivers steer
    messages at safe points; ``delegation`` runs task calls as child submissions;
    ``wrappers`` wrap every model client and tool executor invoked;
    ``redact`` rewrites error text (tool errors, execution failures) before it is journaled,
    to keep secrets out of the permanent log; ``model_calls`` bounds and retries every model
    call (the engine's timeout and retry policy; ``None``: each call is made once, without a
    timeout, and its error raised as it came); ``now`` is what time it is for a sleep
    (``Turn.sleep``: the engine's clock; the system's by default); ``clock`` measures tool
    policies' timeouts and waits (the engine's clock; the event loop's by default). A
    replay keeps only ``redact`` (and ``now`` and ``clock``: a replay asks neither).

    Example::

        hooks = JournalHooks(observer=printer, redact=SecretRedactor.from_env(os.environ))
        journal = await Journal.open(store, conversation_id, model=model, hooks=hooks)
    """

    observer: JournalObserver | None = None
    steer_source: SteerSource | None = None
    delegation: Delegation | None = None
    wrappers: EffectWrappers | None = None
    redact: Callable[[str], str] = _unchanged
    model_calls: ModelCallPolicy | None = None
    now: Callable[[], datetime] = _utc_now
    clock: RetryClock | None = None
    """What measures a tool policy's timeouts and waits (``None``: the event loop)."""
    usage_holder: str | None = None
    """Whose tenant usage reservations the model calls it appends give back (a worker's
    share, ``UsageStore.append``'s ``usage_holder``); ``None``: the conversation's."""
    usage_appended: Callable[[int], None] | None = None
    """Told, as each append with a ``usage_holder`` commits, how many model calls it
    completed (each gave a reservation back)."""

    def replaying(self) -> JournalHooks:
        """The hooks of a replay: no observer, steering, delegation or wrappers (nothing is
        invoked)."""
        return JournalHooks(redact=self.redact, now=self.now, clock=self.clock)

    async def sleep(self, seconds: float) -> None:
        """Wait on the clock (a tool policy's wait before its next attempt)."""
        if self.clock is None:
            await asyncio.sleep(seconds)
        else:
            await self.clock.sleep(seconds)

    def model(self, model: Model) -> Model:
        return model if self.wrappers is None else self.wrappers.model(model)

    def tools(self, tools: ToolExecutor) -> ToolExecutor:
        return tools if self.wrappers is None else self.wrappers.tools(tools)


NO_HOOKS: Final = JournalHooks()
NO_STAMP: Final = Stamp()
