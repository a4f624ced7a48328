"""Sessions as an operator sees them: listed newest activity first with where each stands,
and erased for good.

The store's sessions index pages the conversations; what a page shows besides (a status,
pending approvals, usage) is read per row, bounded by the page's size.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Final

from tether._payloads import ConversationParent
from tether.engine._context import EngineContext
from tether.engine._eventlog import log_erased
from tether.engine._runs import wait_settled
from tether.engine._usage import UsageTotals, total_usage
from tether.errors import SessionBusy
from tether.records import Actor, SettlementStatus, SubmissionSettled
from tether.store import (
    ErasedSession,
    GateKind,
    GateStatus,
    GateStore,
    SessionKey,
    SessionRow,
    Store,
    SubmissionStatus,
    require_capability,
)

__all__ = (
    "MAX_SESSIONS_PAGE",
    "SessionInfo",
    "SessionPage",
    "SessionState",
    "erase_session",
    "session_page",
)

MAX_SESSIONS_PAGE: Final = 500
_TAIL: Final = 64
"""Records read from a log's end to find how its last submission settled."""
_SCAN_PAGES: Final = 10
"""Store pages a status filter reads at most for one page of matches (a page may then be
short; its cursor goes on from where the scan stopped)."""


class SessionState(StrEnum):
    """Where a session stands: something of it is queued or running, it waits (an approval,
    its children, a timer, a delayed dispatch at its head), its last submission failed, or
    it is at rest."""

    IDLE = "idle"
    RUNNING = "running"
    WAITING = "waiting"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session as ``Runtime.sessions`` lists it.

    ``parent`` is where a fork or a task child branched off; ``usage`` is read only when
    asked for (it reads the whole log)."""

    key: SessionKey
    conversation_id: str
    created_at: datetime
    last_activity_at: datetime
    records: int
    bytes: int
    status: SessionState
    pending_approvals: int
    parent: ConversationParent | None = None
    usage: UsageTotals | None = None
    tenant: str | None = None
    """The tenant the session belongs to (``None``: none)."""
    pending_inputs: int = 0
    """Questions its runs wait on a person to answer (``Runtime.inputs``)."""


@dataclass(frozen=True, slots=True)
class SessionPage:
    """A page of sessions, newest activity first, and the cursor of the next page (``None``
    when none follows).

    Example::

        page = await runtime.sessions(agent="support", status=SessionState.WAITING)
        while True:
            for session in page.sessions:
                print(session.key, session.status, session.pending_approvals)
            if page.next_cursor is None:
                break
            page = await runtime.sessions(agent="support", cursor=page.next_cursor)
    """

    sessions: tuple[SessionInfo, ...]
    next_cursor: str | None


async def _state(store: Store, row: SessionRow) -> SessionState:
    open_ones = await store.list_submissions(conversation_id=row.conversation_id, unsettled=True)
    if any(s.status is SubmissionStatus.WAITING for s in open_ones) or (
        open_ones and open_ones[0].status is SubmissionStatus.SCHEDULED
    ):
        return SessionState.WAITING  # for a decision, its children, a timer, or its time
    if open_ones:
        return SessionState.RUNNING
    tail = await store.read(row.conversation_id, after_seq=max(row.records - _TAIL, 0), limit=_TAIL)
    for record in reversed(tail):
        if record.kind == SubmissionSettled.KIND:
            payload = record.payload
            assert isinstance(payload, SubmissionSettled)
            failed = payload.status is SettlementStatus.FAILED
            return SessionState.FAILED if failed else SessionState.IDLE
    return SessionState.IDLE


async def _pending(
    store: GateStore | None, rows: list[SessionRow], tenant: str | None = None
) -> dict[tuple[str, GateKind], int]:
    """Pending gates per conversation and kind, one gates query per agent and instance on
    the page (none on a store without gates: nothing there waits on a person)."""
    counts: dict[tuple[str, GateKind], int] = {}
    if store is None:
        return counts
    for agent, instance in {(row.key.agent, row.key.instance) for row in rows}:
        after: str | None = None
        while True:
            gates = await store.list_gates(
                status=GateStatus.PENDING,
                agent=agent,
                instance=instance,
                limit=500,
                after=after,
                tenant=tenant,
            )
            for gate in gates:
                place = (gate.conversation_id, gate.kind)
                counts[place] = counts.get(place, 0) + 1
            if len(gates) < 500:
                break
            after = gates[-1].cursor
    return counts


async def session_page(
    context: EngineContext,
    *,
    agent: str | None,
    instance: str | None,
    status: SessionState | None,
    limit: int,
    cursor: str | None,
    usage: bool,
    tenant: str | None = None,
) -> SessionPage:
    """Up to ``limit`` sessions past ``cursor`` (``tenant``'s only, if given); see
    :class:`SessionPage`."""
    if not 1 <= limit <= MAX_SESSIONS_PAGE:
        raise ValueError(f"limit must be 1..{MAX_SESSIONS_PAGE}, got {limit}")
    if instance is not None and agent is None:
        raise ValueError("an instance filter needs its agent")
    store = context.store
    index = require_capability(context.capabilities.sessions, "sessions")
    found: list[tuple[SessionRow, SessionState]] = []
    after = cursor
    next_cursor: str | None = None
    for _ in range(_SCAN_PAGES if status is not None else 1):
        # One row more than asked: a cursor is handed out only if a row follows it.
        rows = await index.list_sessions(
            agent=agent, instance=instance, limit=limit + 1, after=after, tenant=tenant
        )
        page, follows = rows[:limit], len(rows) > limit
        for place, row in enumerate(page):
            after = row.cursor
            state = await _state(store, row)
            if status is None or state is status:
                found.append((row, state))
            if len(found) == limit:
                next_cursor = after if place < len(page) - 1 or follows else None
                break
        else:
            next_cursor = after if follows else None
        if len(found) == limit or next_cursor is None:
            break
    pending = await _pending(context.capabilities.gates, [row for row, _ in found], tenant)
    sessions = []
    for row, state in found:
        totals = None
        if usage:
            view = await context.views.refreshed(store, row.conversation_id)
            totals = total_usage(view.records)
        sessions.append(
            SessionInfo(
                key=row.key,
                conversation_id=row.conversation_id,
                created_at=row.created_at,
                last_activity_at=row.last_activity_at,
                records=row.records,
                bytes=row.bytes,
                status=state,
                pending_approvals=pending.get((row.conversation_id, GateKind.APPROVAL), 0),
                pending_inputs=pending.get((row.conversation_id, GateKind.INPUT), 0),
                parent=row.parent,
                usage=totals,
                tenant=row.tenant,
            )
        )
    return SessionPage(tuple(sessions), next_cursor)


async def erase_session(
    context: EngineContext,
    key: SessionKey,
    *,
    force: bool,
    settle_within: float,
    by: Actor | None = None,
) -> ErasedSession:
    """Erase a session's conversation (see ``RetentionStore.erase_session``). A session with
    anything unsettled is refused (``SessionBusy``) unless ``force``: then what is unsettled
    is aborted first (by ``by``), and the erase waits up to ``settle_within`` seconds for it
    to settle. Nothing of the session stays in the store: who erased it (``by``) is logged
    on ``tether.engine.events`` and returned."""
    store = context.store
    retention = require_capability(context.capabilities.retention, "retention")
    conversation = await store.find_conversation(key)
    busy = await store.list_submissions(conversation_id=conversation.id, unsettled=True)
    if busy and not force:
        states = ", ".join(sorted({s.status.value for s in busy}))
        raise SessionBusy(
            f"session {key} has {len(busy)} unsettled submission(s) ({states}): "
            "abort them first, or erase with force"
        )
    for submission in busy:
        await store.request_cancel(submission.id, now=context.clock.now(), by=by)
        context.runs.abort(submission.id)
    if busy:
        context.runs.wake_claims()
        feed = context.capabilities.change_feed
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(settle_within):
                for submission in busy:  # woken by each settlement, not polled
                    await wait_settled(store, feed, context.runs, submission.id)
    erased = await retention.erase_session(conversation.id)
    context.views.forget(conversation.id)
    log_erased(erased, by, conversation.tenant)
    return dataclasses.replace(erased, by=by)
