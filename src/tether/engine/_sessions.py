"""Sessions as an operator sees them: listed newest activity first with where each stands,
and erased for good.

The store's sessions index pages the conversations; what a page shows besides (a status,
pending approvals, usage) is read per row, bounded by the page's size.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from tether._payloads import ConversationParent
from tether._states import SessionState
from tether.engine._context import EngineContext
from tether.engine._eventlog import log_erased
from tether.engine._queued import QueuedWaits
from tether.engine._runs import wait_settled
from tether.engine._usage import UsageTotals, total_usage
from tether.errors import ConversationNotFound, SessionBusy
from tether.records import Actor, SettlementStatus, SubmissionSettled
from tether.store import (
    ErasedSession,
    GateKind,
    GateStatus,
    GateStore,
    MetadataValue,
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
    "patch_session_metadata",
    "session_page",
)

MAX_SESSIONS_PAGE: Final = 500
_TAIL: Final = 64
"""Records read from a log's end to find how its last submission settled."""
_SCHEDULED: Final = "scheduled"
"""The waiting reason of a session whose head is a delayed dispatch, not due yet."""
_SCAN_PAGES: Final = 10
"""Store pages a status filter reads at most for one page of matches (a page may then be
short; its cursor goes on from where the scan stopped)."""


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
    wait_reason: str | None = None
    """What a ``waiting`` session waits for: a parked submission's reason (``approval``,
    ``input``, ``children``, ``budget``, ``timer``, ``version_diverged``), ``scheduled`` (a
    delayed dispatch at its head), or what holds its queued head back: ``limit`` (its
    agent's or its tenant's runs in flight are at their limit) or
    ``no_worker_for_version``."""
    held_by: str | None = None
    """For ``limit``: whose, ``agent`` or ``tenant``."""
    due_at: datetime | None = None
    """When a ``scheduled`` head is due, or a parked run's timer (or deadline) wakes it."""
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)
    """The session's metadata (``Runtime.patch_session_metadata``, a dispatch's
    ``metadata``)."""


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


@dataclass(frozen=True, slots=True)
class _Standing:
    state: SessionState
    wait_reason: str | None = None
    held_by: str | None = None
    due_at: datetime | None = None


async def _standing(store: Store, row: SessionRow, queued: QueuedWaits) -> _Standing:
    """Where a session stands, and what it waits for: a parked submission's reason, its
    head's time (``scheduled``), or what holds its queued head back (a limit, a worker of
    its version); a queued head nothing holds is ``running`` (a claim takes it next)."""
    open_ones = await store.list_submissions(conversation_id=row.conversation_id, unsettled=True)
    parked = next((s for s in open_ones if s.status is SubmissionStatus.WAITING), None)
    if parked is not None:  # for a decision, an answer, its children, its budget, a timer
        return _Standing(SessionState.WAITING, parked.wait_reason, due_at=parked.wait_until)
    if open_ones:
        head = open_ones[0]
        if head.status is SubmissionStatus.SCHEDULED:
            return _Standing(SessionState.WAITING, _SCHEDULED, due_at=head.wait_until)
        waits = await queued.of(head)
        if waits is not None:
            return _Standing(SessionState.WAITING, waits.reason, waits.held_by)
        return _Standing(SessionState.RUNNING)
    tail = await store.read(row.conversation_id, after_seq=max(row.records - _TAIL, 0), limit=_TAIL)
    for record in reversed(tail):
        if record.kind == SubmissionSettled.KIND:
            payload = record.payload
            assert isinstance(payload, SubmissionSettled)
            failed = payload.status is SettlementStatus.FAILED
            return _Standing(SessionState.FAILED if failed else SessionState.IDLE)
    return _Standing(SessionState.IDLE)


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
    metadata: Mapping[str, str] | None = None,
    text: str | None = None,
    since: datetime | None = None,
) -> SessionPage:
    """Up to ``limit`` sessions past ``cursor`` (``tenant``'s only, if given), narrowed by
    the search filters given (``SessionListStore.list_sessions``); see
    :class:`SessionPage`."""
    if not 1 <= limit <= MAX_SESSIONS_PAGE:
        raise ValueError(f"limit must be 1..{MAX_SESSIONS_PAGE}, got {limit}")
    if instance is not None and agent is None:
        raise ValueError("an instance filter needs its agent")
    store = context.store
    index = require_capability(context.capabilities.sessions, "sessions")
    search: dict[str, Any] = {}  # only those given: a backend may predate them
    if metadata:
        search["metadata"] = metadata
    if text is not None and text.strip():
        search["text"] = text
    if since is not None:
        search["since"] = since
    found: list[tuple[SessionRow, _Standing]] = []
    queued = QueuedWaits(context)
    after = cursor
    next_cursor: str | None = None
    for _ in range(_SCAN_PAGES if status is not None else 1):
        # One row more than asked: a cursor is handed out only if a row follows it.
        rows = await index.list_sessions(
            agent=agent, instance=instance, limit=limit + 1, after=after, tenant=tenant, **search
        )
        page, follows = rows[:limit], len(rows) > limit
        for place, row in enumerate(page):
            after = row.cursor
            standing = await _standing(store, row, queued)
            if status is None or standing.state is status:
                found.append((row, standing))
            if len(found) == limit:
                next_cursor = after if place < len(page) - 1 or follows else None
                break
        else:
            next_cursor = after if follows else None
        if len(found) == limit or next_cursor is None:
            break
    pending = await _pending(context.capabilities.gates, [row for row, _ in found], tenant)
    sessions = []
    for row, standing in found:
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
                status=standing.state,
                pending_approvals=pending.get((row.conversation_id, GateKind.APPROVAL), 0),
                pending_inputs=pending.get((row.conversation_id, GateKind.INPUT), 0),
                parent=row.parent,
                usage=totals,
                tenant=row.tenant,
                wait_reason=standing.wait_reason,
                held_by=standing.held_by,
                due_at=standing.due_at,
                metadata=row.metadata,
            )
        )
    return SessionPage(tuple(sessions), next_cursor)


async def patch_session_metadata(
    context: EngineContext,
    key: SessionKey,
    patch: Mapping[str, Any],
    *,
    tenant: str | None = None,
) -> dict[str, MetadataValue]:
    """Apply an RFC 7396 merge ``patch`` to the session's metadata and return what it
    leaves (see ``SessionListStore.patch_session_metadata``). ``ConversationNotFound`` for
    a session without a conversation, or another tenant's (``tenant`` given)."""
    index = require_capability(context.capabilities.sessions, "sessions")
    conversation = await context.store.find_conversation(key)
    if tenant is not None and conversation.tenant != tenant:
        raise ConversationNotFound(str(key))
    return await index.patch_session_metadata(conversation.id, patch)


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
    outbox = context.capabilities.webhooks
    if outbox is not None:  # the deliveries' bodies hold what the session said
        await outbox.forget_webhook_deliveries(key)
    context.views.forget(conversation.id)
    log_erased(erased, by, conversation.tenant)
    return dataclasses.replace(erased, by=by)
