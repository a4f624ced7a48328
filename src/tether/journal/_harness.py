"""What a harness is, and what the journal needs around it: tools and observers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import JsonValue

from tether.messages import ToolCall, ToolResult
from tether.models import Model, StreamDelta
from tether.records import Record

if TYPE_CHECKING:
    from tether.journal._turn import Turn

__all__ = ("EffectWrappers", "Harness", "JournalObserver", "ToolExecutor", "ToolScope")


@runtime_checkable
class Harness(Protocol):
    """Drives one execution. It never calls a model or a host tool itself: it asks the turn.

    Example::

        class Echo:
            name, version = "echo", "1"

            async def run(self, turn: Turn) -> JsonValue:
                request = ModelRequest(model="local:echo", messages=(*turn.history, *turn.inputs))
                return (await turn.model(request)).message.text
    """

    name: str
    version: str

    async def run(self, turn: Turn) -> JsonValue: ...


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


@runtime_checkable
class ToolExecutor(Protocol):
    """Runs host-mediated tools. It must deduplicate on ``scope.idempotency_key`` if a tool
    is declared idempotent: recovery may call it again with the same key."""

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult: ...


class JournalObserver(Protocol):
    """Hooks for streaming: ``on_record`` after each durable append, ``on_delta`` per chunk.

    Deltas are never effects: replay emits none. A failing observer never fails a run.
    An observer may also define ``async on_progress(execution_id, call_id, text)`` for the
    partial output tools report.
    """

    async def on_record(self, records: Sequence[Record]) -> None: ...

    async def on_delta(self, execution_id: str, call_id: str, delta: StreamDelta) -> None: ...


@dataclass(frozen=True, slots=True)
class EffectWrappers:
    """How the host wraps every model client and tool executor a journal invokes (tracing,
    interceptors): the journal's own and any a harness hands to a single call."""

    model: Callable[[Model], Model]
    tools: Callable[[ToolExecutor], ToolExecutor]
