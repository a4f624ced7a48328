"""The journal's own appender: head tracking, fencing, id stamps and the observer."""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Sequence
from typing import Final, TypeAlias

from tether.errors import JournalError
from tether.journal._effects import NO_HOOKS, NO_STAMP, JournalHooks, Stamp
from tether.journal._view import LogView
from tether.records import AssistantMessageCompleted, Payload, Record, RecordDraft
from tether.store import ClaimSettlement, LogStore, StoreCapabilities

__all__ = ("NOT_MINTED", "Fence", "JournalLog", "NotMinted")

logger = logging.getLogger("tether.journal")

_COMPLETED: Final = AssistantMessageCompleted.KIND


class NotMinted(enum.Enum):
    """The fence of a writer that has minted none: opening it superseded no one, and the
    store takes its appends only while no writer of the conversation has minted one (the
    store keeps it as fence 0, where every conversation starts). A writer that must write
    whoever came before mints one first (``LogStore.mint_fence``)."""

    NOT_MINTED = "not_minted"


NOT_MINTED: Final = NotMinted.NOT_MINTED

Fence: TypeAlias = int | NotMinted
"""A writer's fence: one it minted (or was handed with its claim), or :data:`NOT_MINTED`."""


class JournalLog:
    """Appends the records of one writer to one conversation.

    Every append is a CAS on the head this writer last saw, under its fence, so a writer
    that was superseded (or raced) can never interleave records. The ``stamp``'s ids are
    stamped on every record it writes; the ``hooks``' observer hears every append, and
    their ``redact`` masks secrets in the error text the journal writes through it.
    """

    def __init__(
        self,
        store: LogStore,
        conversation_id: str,
        *,
        fence: Fence,
        head: int,
        view: LogView | None = None,
        stamp: Stamp = NO_STAMP,
        hooks: JournalHooks = NO_HOOKS,
        capabilities: StoreCapabilities | None = None,
    ) -> None:
        self.store = store
        self.conversation_id = conversation_id
        self.fence: Fence = fence
        self.head = head
        self.submission_id = stamp.submission_id
        self.attempt_id = stamp.attempt_id
        self.observer = hooks.observer
        # An observer may time the commits it waited for (the engine's metrics do).
        self._on_commit = getattr(hooks.observer, "on_commit", None)
        self.view = view
        self.redact = hooks.redact
        self.usage_holder = hooks.usage_holder
        self._usage_appended = hooks.usage_appended
        """Applied to error text (tool errors, execution failures) before it is written."""
        self._capabilities = capabilities
        self._lock = asyncio.Lock()

    @property
    def capabilities(self) -> StoreCapabilities:
        """What the store offers beyond the log: the runtime's, detected when it opened the
        store; found out here, once, only for a journal opened without them."""
        if self._capabilities is None:
            self._capabilities = StoreCapabilities.of(self.store)
        return self._capabilities

    def draft(self, payload: Payload, execution_id: str | None) -> RecordDraft:
        return RecordDraft(
            payload,
            submission_id=self.submission_id,
            attempt_id=self.attempt_id,
            execution_id=execution_id,
        )

    @property
    def store_fence(self) -> int:
        """The fence as the store takes it: 0 for :data:`NOT_MINTED`."""
        return 0 if self.fence is NOT_MINTED else self.fence

    async def append(
        self,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int | None = None,
        settle: ClaimSettlement | None = None,
        landed: list[Record] | None = None,
    ) -> list[Record]:
        """Append after the tracked head (or ``expected_seq``), settling ``settle`` in the same
        commit if given; durable when this returns. ``landed`` gets the records as soon as
        the store returns them (a caller cancelled later still learns they are in)."""
        async with self._lock:
            head = self.head if expected_seq is None else expected_seq
            started = time.perf_counter() if self._on_commit is not None else 0.0
            holder = self.usage_holder
            if holder is not None and (usage := self.capabilities.usage) is not None:
                records = await usage.append_spending(
                    self.conversation_id,
                    drafts,
                    expected_seq=head,
                    fence=self.store_fence,
                    usage_holder=holder,
                    settle=settle,
                )
                if self._usage_appended is not None:  # before any await: counted if committed
                    self._usage_appended(_completions(records))
            elif settle is None:
                records = await self.store.append(
                    self.conversation_id, drafts, expected_seq=head, fence=self.store_fence
                )
            elif (whole := self.capabilities.whole) is not None:
                records = await whole.append_settled(
                    self.conversation_id,
                    drafts,
                    expected_seq=head,
                    fence=self.store_fence,
                    settle=settle,
                )
            else:
                raise JournalError("settling with an append needs a whole Store")
            if self._on_commit is not None:
                operation = "append" if settle is None else "append_settled"
                self._on_commit(operation, time.perf_counter() - started)
            self.head = records[-1].seq
            if landed is not None:
                landed.extend(records)
            if self.view is not None:
                self.view.extend(records)
        if self.observer is not None:
            try:
                await self.observer.on_record(records)
            except Exception:  # an observer never fails a run
                logger.exception("journal observer failed on_record")
        return records


def _completions(records: Sequence[Record]) -> int:
    """The model calls ``records`` complete (an interrupted completion is no call's)."""
    done = 0
    for record in records:
        if record.kind == _COMPLETED:
            payload = record.payload
            assert isinstance(payload, AssistantMessageCompleted)
            done += not payload.interrupted
    return done
