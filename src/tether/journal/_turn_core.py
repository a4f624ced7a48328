"""A turn's bookkeeping, under its effect methods (``Turn``, in ``_turn``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NoReturn

from pydantic import JsonValue

from tether._wire import JsonObject
from tether.errors import ReplayDiverged, TetherError, TurnClosed
from tether.journal._effects import NO_HOOKS, JournalHooks, ToolExecutor
from tether.journal._log import JournalLog
from tether.journal._outcomes import asked, effect_of
from tether.journal._recorded import Recorded
from tether.messages import Message, ModelRequest
from tether.models import Model
from tether.records import Payload, Record, RecordDraft

__all__ = ("Mode", "Question", "TurnCore")


@dataclass(frozen=True, slots=True)
class Question:
    """What an input call asks a person: the prompt, and the schema the answer must fit."""

    prompt: str
    schema: JsonObject | None = None


class Mode(StrEnum):
    LIVE = "live"
    REPLAY = "replay"
    RESUME = "resume"


class TurnCore:
    """A turn's bookkeeping: its records held behind, its sticky failure, its recorded
    effects and the checks every effect call starts with (the effects are :class:`Turn`'s)."""

    def __init__(
        self,
        *,
        log: JournalLog,
        execution_id: str,
        session: str,
        mode: Mode,
        recorded: Recorded,
        history: list[Message] | Callable[[], list[Message]],
        inputs: list[Message],
        config: dict[str, JsonValue] | None,
        model: Model | None = None,
        tools: ToolExecutor | None = None,
        hooks: JournalHooks = NO_HOOKS,
    ) -> None:
        self.execution_id = execution_id
        self._history = history
        self.inputs = inputs
        self.config = config
        self.mode = mode
        self.model_invocations = 0
        self.tool_invocations = 0
        self._log = log
        self._session = session
        self._recorded = recorded
        self._model = model
        self._tools = tools
        self._hooks = hooks
        self._observer = hooks.observer
        self._steer_source = hooks.steer_source
        self._delegation = hooks.delegation
        self._pending_children: list[str] = []
        """Task calls of this turn whose child has not settled: it parks on them."""
        self._failure: TetherError | None = None
        self._closed = False
        self._call_ids: set[str] = set()
        self._asks = 0
        self._behind: list[Payload] = []  # written with the next append
        self._returned: list[RecordDraft] = []
        """Drafts of an append cut short by a cancellation before the store answered: they
        go first in the next append (the failure record's), so that the log never shows an
        execution's failure without its start and inputs."""
        self._held_messages: dict[int, tuple[Message, ...]] = {}
        self._lock = asyncio.Lock()
        self._offered: dict[str, JsonObject] = {}
        """The parameters schema of each tool the model was last offered, by tool name: an
        approval request records its tool's, for edits to be checked against."""

    @property
    def history(self) -> list[Message]:
        """The transcript as it stood when this execution started (the reduced active path).

        Built on first use: a harness that never reads it (one that keeps its own state)
        costs no transcription."""
        if callable(self._history):
            self._history = self._history()
        return self._history

    # --- bookkeeping ------------------------------------------------------------------

    @property
    def failure(self) -> TetherError | None:
        """The sticky failure (a divergence or a park), if one happened."""
        return self._failure

    def _check(self) -> None:
        if self._closed:
            raise TurnClosed(f"execution {self.execution_id} has ended; its turn is closed")
        if self._failure is not None:
            raise self._failure

    def _stick(self, error: TetherError) -> NoReturn:
        self._failure = error
        raise error

    def _diverge(
        self,
        message: str,
        *,
        at: Record | None = None,
        got: Payload | JsonObject | None = None,
        request: ModelRequest | None = None,
    ) -> NoReturn:
        """Fail the turn: the code asked for ``got`` where the log holds ``at``."""
        self._stick(
            ReplayDiverged(
                f"execution {self.execution_id}: {message}",
                execution_id=self.execution_id,
                seq=None if at is None else at.seq,
                expected=None if at is None else effect_of(at),
                got=asked(got),
                request=request,
            )
        )

    async def _append(self, payloads: Sequence[Payload]) -> list[Record]:
        """Append ``payloads`` after whatever is held behind; durable when this returns."""
        batch = self.take_behind()
        batch.extend(self._log.draft(p, self.execution_id) for p in payloads)
        if not batch:
            return []
        landed: list[Record] = []
        try:
            records = await self._log.append(batch, landed=landed)
        except TetherError as exc:
            # The log is no longer where this turn believes: nothing more may be written.
            self._failure = exc
            raise
        except asyncio.CancelledError:
            # Had the store committed them all the same, the failure record's append is
            # refused (its CAS) and the log stays as a crash would leave it: resumable.
            if not landed:
                self._returned[:0] = batch
            raise
        self.keep_messages(batch, records)
        return records

    def hold_behind(
        self, payloads: Sequence[Payload], messages: dict[int, tuple[Message, ...]]
    ) -> None:
        """Hold ``payloads`` to be written with the next append (records that need not be
        durable on their own: nothing was invoked on their account). ``messages`` (by ``id``
        of the payload) are what the harness was handed for them: their records keep them."""
        self._behind.extend(payloads)
        self._held_messages.update(messages)

    def keep_messages(self, drafts: Sequence[RecordDraft], records: Sequence[Record]) -> None:
        """Give the records of held inputs the messages the harness was handed for them, so
        that the history and the inputs are the same objects (see ``messages_of``)."""
        if not self._held_messages:
            return
        for draft, record in zip(drafts, records, strict=True):
            held = self._held_messages.pop(id(draft.payload), None)
            if held is not None:
                record._messages = held

    async def flush_behind(self) -> None:
        """Write what is held behind now, so that readers of the log see it."""
        async with self._lock:
            if self.held_count and self._failure is None and not self._closed:
                await self._append(())

    @property
    def held_count(self) -> int:
        """How many records the next append writes before its own (what it puts in front)."""
        return len(self._returned) + len(self._behind)

    def take_behind(self) -> list[RecordDraft]:
        """The records held behind, as drafts; the caller must append them (the journal puts
        them in front of the execution's end or failure record)."""
        behind, self._behind = self._behind, []
        drafts = [self._log.draft(p, self.execution_id) for p in behind]
        if self._returned:
            drafts[:0], self._returned = self._returned, []
        return drafts

    def _live_allowed(
        self,
        what: str,
        got: Payload | JsonObject | None = None,
        request: ModelRequest | None = None,
    ) -> None:
        if self.mode is Mode.REPLAY:
            self._diverge(
                f"replay asked for {what} beyond the recorded effects", got=got, request=request
            )

    def next_recorded(self) -> Record | None:
        """The effect replay or resume will serve next (``None`` once the turn is live):
        lets a harness that mirrors an outside stream re-emit what was recorded."""
        return self._recorded.peek_intent()

    def close(self) -> None:
        """Seal the turn: every later effect call raises ``TurnClosed``."""
        self._closed = True

    def check_consumed(self) -> None:
        """Replay and resume must consume every recorded effect (else the harness diverged)."""
        if self._failure is not None:
            raise self._failure
        left = self._recorded.unconsumed()
        if left:
            kinds = ", ".join(f"{r.kind}@{r.seq}" for r in left[:5])
            total = len(self._recorded.records)
            self._diverge(
                f"consumed {total - len(left)} of {total} recorded effects; left: {kinds}",
                at=left[0],
                got={"kind": "execution_ended"},
            )
