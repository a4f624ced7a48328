"""Retention's passes: erase sessions idle past a limit, cut the head of long logs
(docs/retention.md).

A :class:`Retention` policy sits on the runtime (``Runtime(retention=...)``, ``tether serve
--retain-days``), with a policy of its own for any agent. A pass (:func:`prune`) walks the
sessions index once, newest activity first, and for each session decides by its agent's
policy:

- idle longer than ``erase_after_idle``: erased, unless something of it is unsettled (a run,
  a queued submission, an approval or children it waits for): work in flight is never lost
  to retention, however old;
- (once per pass, not per session) long-term memory items not put again for longer than
  ``memory_after_idle`` are erased (``MemoryItemStore.erase_memory``), on a store that
  offers ``memory``; a dry run leaves memory alone and counts none;
- a log holding more than ``keep_records`` records by a quarter: its head is cut through the
  latest point that keeps at least ``keep_records`` and splits no submission (see
  :func:`tether.journal.truncation_point`), and replaced by a ``log_truncated`` record that
  carries the transcript, so the session resumes, verifies and replays what remains.

A worker runtime with a policy runs a :class:`Pruner` that makes a pass every ``every``. Two
pruners on one store may race: the loser's erase finds the session gone, its cut finds the
head cut already, and both move on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Final

from tether._tasks import cancel_and_wait
from tether.engine._context import EngineContext
from tether.engine._retention import Retention
from tether.engine._sessions import erase_session
from tether.engine._usage import total_usage
from tether.errors import ConversationNotFound, SeqTruncated, SessionBusy
from tether.journal import LogView, truncation_anchor, truncation_point
from tether.messages import Usage
from tether.store import (
    SessionKey,
    SessionListStore,
    SessionRow,
    Store,
    require_capability,
)

__all__ = ("PruneAction", "PruneOutcome", "PruneReport", "Pruner", "prune")

logger = logging.getLogger("tether.engine")

_PAGE: Final = 200
_SLACK: Final = 4
"""A log is cut once it holds a quarter more than it keeps: each cut then removes at least
that quarter, and rewrites its transcript no more often than that."""


class PruneAction(StrEnum):
    ERASE = "erase"
    TRUNCATE = "truncate"


@dataclass(frozen=True, slots=True)
class PruneOutcome:
    """What a pass did, or would do, to one session.

    ``records`` and ``bytes`` are what the session kept before; ``removed`` the records an
    erase or cut takes (0 for one refused); ``through_seq`` where a cut falls. ``skipped``
    says why it was left alone (``"busy"``: something of it is unsettled), ``None`` if done
    (or, in a dry run, if it would be)."""

    action: PruneAction
    key: SessionKey
    conversation_id: str
    last_activity_at: datetime
    records: int
    bytes: int
    removed: int = 0
    through_seq: int | None = None
    bytes_after: int | None = None
    skipped: str | None = None


@dataclass(frozen=True, slots=True)
class PruneReport:
    """A pass over the sessions index: how many sessions it looked at, and what it did (or
    with ``dry_run``, would do) to each it touched."""

    scanned: int
    outcomes: tuple[PruneOutcome, ...]
    dry_run: bool
    memory_erased: int = 0
    """How many long-term memory items the pass erased (``Retention.memory_after_idle``)."""

    @property
    def erased(self) -> int:
        return sum(o.action is PruneAction.ERASE and o.skipped is None for o in self.outcomes)

    @property
    def truncated(self) -> int:
        return sum(o.action is PruneAction.TRUNCATE and o.skipped is None for o in self.outcomes)


async def prune(
    context: EngineContext, retention: Retention, *, dry_run: bool = False
) -> PruneReport:
    """One pass of ``retention`` over every session of the store (see the module's doc)."""
    index = require_capability(context.capabilities.sessions, "sessions")
    require_capability(context.capabilities.retention, "retention")
    now = context.clock.now()
    scanned = 0
    outcomes: list[PruneOutcome] = []
    async for row in _every_session(index):
        scanned += 1
        policy = retention.of(row.key.agent)
        idle = policy.erase_after_idle
        if idle is not None and row.last_activity_at < now - idle:
            outcomes.append(await _erase(context, row, dry_run=dry_run))
        elif policy.keep_records is not None and row.records > policy.keep_records:
            outcome = await _cut(context, row, policy.keep_records, dry_run=dry_run)
            if outcome is not None:
                outcomes.append(outcome)
    memory_erased = 0
    memory = context.capabilities.memory
    if retention.memory_after_idle is not None and memory is not None and not dry_run:
        memory_erased = await memory.erase_memory(
            (), updated_before=now - retention.memory_after_idle
        )
    return PruneReport(scanned, tuple(outcomes), dry_run, memory_erased)


async def _every_session(store: SessionListStore) -> AsyncIterator[SessionRow]:
    after: str | None = None
    while page := await store.list_sessions(limit=_PAGE, after=after):
        for row in page:
            yield row
        after = page[-1].cursor


def _outcome(row: SessionRow, action: PruneAction) -> PruneOutcome:
    return PruneOutcome(
        action, row.key, row.conversation_id, row.last_activity_at, row.records, row.bytes
    )


async def _erase(context: EngineContext, row: SessionRow, *, dry_run: bool) -> PruneOutcome:
    outcome = _outcome(row, PruneAction.ERASE)
    stored = await _stored_records(context.store, row)
    if dry_run:
        busy = await context.store.list_submissions(
            conversation_id=row.conversation_id, unsettled=True
        )
        return replace(outcome, skipped="busy") if busy else replace(outcome, removed=stored)
    try:
        await erase_session(context, row.key, force=False, settle_within=0)
    except SessionBusy:
        return replace(outcome, skipped="busy")
    except ConversationNotFound:
        return replace(outcome, skipped="gone")
    return replace(outcome, removed=stored, bytes_after=0)


async def _stored_records(store: Store, row: SessionRow) -> int:
    """How many records the log holds (fewer than its head once truncated)."""
    first = await store.read(row.conversation_id, after_seq=0, limit=1)
    return row.records - first[0].seq + 1 if first else 0


async def _cut(
    context: EngineContext, row: SessionRow, keep: int, *, dry_run: bool
) -> PruneOutcome | None:
    store = context.store
    cid = row.conversation_id
    outcome = _outcome(row, PruneAction.TRUNCATE)
    stored = await _stored_records(store, row)
    if stored <= keep + keep // _SLACK:
        return None
    view = LogView()
    await view.refresh(store, cid)
    through = truncation_point(view.records, keep=keep, fork_seq=view.fork_seq)
    if through == 0:  # no cut past the anchor keeps every submission whole (a long run, say)
        return None if view.truncated_at else replace(outcome, skipped="no cut point")
    outcome = replace(outcome, through_seq=through, removed=through - (view.truncated_at or 1) + 1)
    if dry_run:
        return outcome
    totals = total_usage(view.records[:through])
    usage = Usage(
        input_tokens=totals.input_tokens,
        output_tokens=totals.output_tokens,
        reasoning_tokens=totals.reasoning_tokens,
        cache_read_tokens=totals.cache_read_tokens,
        cache_write_tokens=totals.cache_write_tokens,
    )
    anchor = truncation_anchor(
        view.records, through, usage=usage, model_calls=totals.calls, cost=totals.cost
    )
    try:
        retention = require_capability(context.capabilities.retention, "retention")
        truncated = await retention.truncate_log(cid, anchor)
    except (SeqTruncated, ConversationNotFound):  # another pruner went first
        return replace(outcome, removed=0, skipped="gone")
    context.views.forget(cid)  # what this process holds of it is the whole log: let it go
    return replace(outcome, removed=truncated.removed, bytes_after=truncated.bytes_after)


class Pruner:
    """A worker's task that makes a :func:`prune` pass every ``retention.every``, the first
    soon after it starts. A failed pass is logged and the next one comes as planned."""

    def __init__(self, context: EngineContext, retention: Retention) -> None:
        self.context = context
        self.retention = retention
        self.passes = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="tether-pruner")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _loop(self) -> None:
        clock = self.context.clock
        while True:
            try:
                report = await prune(self.context, self.retention)
                if report.outcomes:
                    logger.info(
                        "retention: %d session(s) erased, %d log(s) truncated",
                        report.erased,
                        report.truncated,
                    )
            except Exception:  # a background pass never dies of one failure
                logger.exception("retention pass failed; the next one comes as planned")
            self.passes += 1
            await clock.sleep(self.retention.every.total_seconds())
