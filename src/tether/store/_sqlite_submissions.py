"""The SQL of submissions (``SubmissionStore``): admission, claims and attempts, leases,
parking, cancellation and settlement, as plain functions over a connection.

Write functions run on the writer's connection inside its transaction (admitting appends the id of
a conversation it creates to ``touched``); read functions run on any reader connection. Both
raise only Tether errors (the caller maps ``sqlite3.Error``).
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from tether._canonical import canonical_json
from tether.errors import ClaimLost, ConversationNotFound, DispatchConflict, SubmissionNotFound
from tether.records import Actor
from tether.store import _sqlite_limits as limits_sql
from tether.store._common import SUBMISSION_COLUMNS, from_micros, submission_filter, to_micros
from tether.store._gates_sql import actor_json
from tether.store._limits import ClaimSlots, HeldBack, LimitAsk
from tether.store._sqlite_children import check_tree_total, has_unsettled_children, wake_parent
from tether.store._sqlite_children import submission as _submission
from tether.store._sqlite_log import ensure_conversation, head, mint_fence
from tether.store._types import (
    WAIT_FOR_CHILDREN,
    Admission,
    Attempt,
    ClaimedHead,
    NewSubmission,
    Submission,
    SubmissionStatus,
)
from tether.store._versions import ANY_VERSION, VersionsServed, served_version

__all__ = (
    "admit",
    "admit_and_claim",
    "claim",
    "claim_runnable",
    "finalize_settlement",
    "get_submission",
    "has_runnable",
    "list_attempts",
    "list_expired_leases",
    "list_runnable",
    "list_submissions",
    "owner_has_claims",
    "park",
    "release",
    "renew_lease",
    "request_cancel",
    "reserve_settlement",
    "settle_absorbed",
    "settled",
    "unpark",
    "update_owned",
)


def get_submission(conn: sqlite3.Connection, submission_id: str) -> Submission:
    row = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE id = ?", (submission_id,)
    ).fetchone()
    if row is None:
        raise SubmissionNotFound(submission_id)
    return _submission(row)


def list_submissions(
    conn: sqlite3.Connection,
    status: SubmissionStatus | None,
    conversation_id: str | None,
    unsettled: bool,
    tenant: str | None = None,
) -> list[Submission]:
    where, params = submission_filter(status, conversation_id, unsettled, "?", tenant)
    rows = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions {where}ORDER BY position", params
    ).fetchall()
    return [_submission(row) for row in rows]


_HEAD_OF_SESSION = (
    "position = (SELECT MIN(o.position) FROM submissions o "
    "WHERE o.conversation_id = submissions.conversation_id AND o.status != 'settled')"
)
# When the head's predecessor in its session settled: its attempt cannot have started
# before (see ``started_at``).
_PREVIOUS_SETTLED_AT = (
    "(SELECT p.settled_at FROM submissions p WHERE p.conversation_id = submissions.conversation_id "
    "AND p.position < submissions.position ORDER BY p.position DESC LIMIT 1)"
)


def started_at(now: datetime, previous_settled_at: int | None) -> int:
    """An attempt's start as stored (microseconds): ``now``, or the settlement of its
    session's previous submission if that is later. The caller reads its clock before the
    claim waits for the writer, and may have read it before that settlement (which is what
    made the head claimable); the attempt's start never precedes it."""
    now_micros = to_micros(now)
    return now_micros if previous_settled_at is None else max(now_micros, previous_settled_at)


def list_runnable(
    conn: sqlite3.Connection, limit: int, serves: VersionsServed | None = None
) -> list[Submission]:
    """The runnable heads in claim order (``claim_rank``, then admission); with ``serves``,
    only those a claim with it may take (the filter is part of the scan: an unservable head
    is passed over, not counted)."""
    rows = conn.execute(*_runnable(SUBMISSION_COLUMNS, limit, serves)).fetchall()
    return [_submission(row) for row in rows]


def has_runnable(
    conn: sqlite3.Connection, serves: VersionsServed | None, held: HeldBack | None = None
) -> bool:
    """Whether a claim (with ``serves``) would find a head: the claim loop's lock-free hint,
    which reads no row whole."""
    return conn.execute(*_runnable("1", 1, serves, held)).fetchone() is not None


def _runnable(
    columns: str, limit: int, serves: VersionsServed | None, held: HeldBack | None = None
) -> tuple[str, tuple[object, ...]]:
    """The query of the runnable heads (``columns`` of each), and its parameters."""
    served, params = ("", ()) if serves is None else _served_filter(serves)
    if held:  # limits (docs/limits.md): its own condition, the rest of the query unchanged
        condition, held_params = _held_filter(held)
        served, params = served + condition, (*params, *held_params)
    # Named when filtered by agent: the unique (agent, instance, session, dispatch_id) index
    # would also serve ``agent = ?``, and with statistics the planner could take it and read
    # every settled submission of the agent; the queued ones, in order, are the few to read.
    # Priorities: claim order is (claim_rank, position), read in order from the partial index
    # of the queued rows (``_priority``: the rank is fixed at admission, aging included).
    # Named without ``serves`` too: left to itself, the planner reads the queued rows from
    # ``submissions_by_status``, tests each for its session's head and sorts them all by
    # rank (a claim at 2,000 queued: 27 million instructions instead of 0.55 million). Not
    # named for ``serves={}``: its filter is a constant false, and SQLite finds no plan that
    # uses a partial index under one ("no query solution"); it reads nothing instead.
    empty = serves is not None and not serves
    indexed = "" if empty else " INDEXED BY submissions_queued_by_rank"
    return (
        f"SELECT {columns} FROM submissions{indexed} WHERE status = 'queued' AND "
        f"{served}{_HEAD_OF_SESSION} ORDER BY claim_rank, position LIMIT ?",
        (*params, limit),
    )


def _held_filter(held: HeldBack) -> tuple[str, tuple[str, ...]]:
    """The condition a head must meet not to be held back by a limit: its agent and its
    tenant are not among those at their limit of runs in flight."""
    terms: list[str] = []
    params: list[str] = []
    if held.agents:
        terms.append(f"agent NOT IN ({', '.join('?' * len(held.agents))})")
        params.extend(sorted(held.agents))
    if held.tenants:
        listed = ", ".join("?" * len(held.tenants))
        terms.append(f"(tenant IS NULL OR tenant NOT IN ({listed}))")
        params.extend(sorted(held.tenants))
    return "".join(f"{term} AND " for term in terms), tuple(params)


def _served_filter(serves: VersionsServed) -> tuple[str, tuple[str, ...]]:
    """The condition (and its parameters) a head must meet to be claimed by a worker serving
    ``serves``: ``served_version`` as SQL. One term per agent, so a worker's statement is
    the same text on every pass (the connection caches it)."""
    terms: list[str] = []
    params: list[str] = []
    for agent, versions in serves.items():
        if ANY_VERSION in versions:
            terms.append("agent = ?")
            params.append(agent)
        else:
            listed = ", ".join("?" * len(versions))
            terms.append(f"(agent = ? AND (version IS NULL OR version IN ({listed})))")
            params.extend((agent, *versions))
    return f"({' OR '.join(terms) or '0'}) AND ", tuple(params)


def list_expired_leases(conn: sqlite3.Connection, now: datetime) -> list[Submission]:
    rows = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE status = 'running' "
        "AND lease_expires_at <= ? ORDER BY position",
        (to_micros(now),),
    ).fetchall()
    return [_submission(row) for row in rows]


def _admitting_tenant(conn: sqlite3.Connection, new: NewSubmission) -> str | None:
    """The tenant an admission admits for: a child's parent's (when held), else its own;
    ``ConversationNotFound`` if the session exists and is not that tenant's (checked before
    a replay is looked up: a foreign one is not told)."""
    tenant = new.tenant
    if new.parent is not None:
        held = conn.execute(
            "SELECT tenant FROM submissions WHERE id = ?", (new.parent.submission_id,)
        ).fetchone()
        if held is not None:
            tenant = held[0]
    if tenant is not None:
        key = new.key
        row = conn.execute(
            "SELECT tenant FROM conversations WHERE agent = ? AND instance = ? AND session = ?",
            (key.agent, key.instance, key.session),
        ).fetchone()
        if row is not None and row[0] != tenant:
            raise ConversationNotFound(str(key))
    return tenant


def admit(conn: sqlite3.Connection, new: NewSubmission, touched: list[str]) -> Admission:
    payload = canonical_json(new.input)
    rank = new.claim_rank()  # ValueError first
    key = new.key
    tenant = _admitting_tenant(conn, new)
    row = conn.execute(
        "SELECT id, input FROM submissions WHERE agent = ? AND instance = ? AND session = ? "
        "AND dispatch_id = ?",
        (key.agent, key.instance, key.session, new.idempotency_key),
    ).fetchone()
    if row is not None:
        if row[1] != payload:
            raise DispatchConflict(new.idempotency_key, str(key))
        return Admission(get_submission(conn, row[0]), created=False)
    if conn.execute("SELECT 1 FROM submissions WHERE id = ?", (new.id,)).fetchone():
        raise DispatchConflict(new.id, str(key))
    parent = new.parent
    if parent is not None and parent.max_total is not None:
        check_tree_total(conn, parent.submission_id, parent.max_total)
    conversation, _ = ensure_conversation(
        conn,
        key,
        new.conversation_id,
        new.created_at,
        touched,
        None if parent is None else parent.conversation_parent(),
        tenant,
        new.by,
    )
    conn.execute(
        "INSERT INTO submissions (id, dispatch_id, agent, instance, session, conversation_id, "
        "status, input, created_at, trace, parent_submission_id, parent_call_id, depth, "
        "tenant, wait_until, priority, claim_rank) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?)",
        (
            new.id,
            new.idempotency_key,
            key.agent,
            key.instance,
            key.session,
            conversation.id,
            "queued" if new.run_at is None else "scheduled",
            payload,
            to_micros(new.created_at),
            canonical_json(dict(new.trace)) if new.trace else None,
            None if parent is None else parent.submission_id,
            None if parent is None else parent.call_id,
            0 if parent is None else parent.depth,
            conversation.tenant,
            None if new.run_at is None else to_micros(new.run_at),
            new.priority,
            rank,
        ),
    )
    return Admission(get_submission(conn, new.id), created=True)


def admit_and_claim(
    conn: sqlite3.Connection,
    new: NewSubmission,
    attempt_id: str,
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
    serves: VersionsServed | None,
    touched: list[str],
    slots: ClaimSlots | None = None,
) -> Admission:
    """``slots``: given back first, then the new submission, as claimed, takes its limit
    slots (all, or none and it stays queued, held back)."""
    if slots is not None:
        for key, holder in slots.give_back:  # runs that ended: their slots are free
            limits_sql.release_limit(conn, key, holder)
    admission = admit(conn, new, touched)
    if not admission.created or admission.submission.status is not SubmissionStatus.QUEUED:
        return admission  # a replay, or a delayed dispatch: never claimed at its admission
    taken: list[LimitAsk] = []
    if slots is not None:
        claiming = dataclasses.replace(admission.submission, attempt_id=attempt_id)
        took = limits_sql.take_slots(conn, slots, claiming, now)
        if took is None:
            return admission  # its agent or tenant is at its limit: queued, held back
        taken = took
    try:
        claimed = claim(conn, new.id, attempt_id, owner_id, lease_expires_at, now, serves)
    except ClaimLost:  # behind an unsettled submission of its session, or not served here
        limits_sql.give_back_slots(conn, taken)
        return admission
    return Admission(claimed, created=True)


def update_owned(
    conn: sqlite3.Connection,
    submission_id: str,
    attempt_id: str | None,
    action: str,
    assignments: str,
    params: tuple[Any, ...],
    *,
    from_status: SubmissionStatus = SubmissionStatus.RUNNING,
) -> Submission:
    """Apply ``assignments`` if in ``from_status`` (and owned by ``attempt_id``, if given):
    the submission as updated."""
    row = conn.execute(
        f"UPDATE submissions SET {assignments} WHERE id = ? AND status = ? "
        f"AND (? IS NULL OR attempt_id = ?) RETURNING {SUBMISSION_COLUMNS}",
        (*params, submission_id, from_status.value, attempt_id, attempt_id),
    ).fetchone()
    if row is None:
        current = get_submission(conn, submission_id)  # raises SubmissionNotFound
        owner = f" under attempt {attempt_id}" if attempt_id is not None else ""
        raise ClaimLost(
            submission_id,
            f"cannot {action}: status {current.status}, attempt {current.attempt_id}, "
            f"not {from_status}{owner}",
        )
    return _submission(row)


_CLAIMABLE = (
    f"SELECT status, conversation_id, agent, version, {_HEAD_OF_SESSION}, "
    f"{_PREVIOUS_SETTLED_AT} FROM submissions WHERE id = ?"
)


def claim(
    conn: sqlite3.Connection,
    submission_id: str,
    attempt_id: str,
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
    serves: VersionsServed | None = None,
) -> Submission:
    # Only what the checks need, in one read: the claim returns the whole row it updates.
    row = conn.execute(_CLAIMABLE, (submission_id,)).fetchone()
    if row is None:
        raise SubmissionNotFound(submission_id)
    status, conversation_id, agent, version, is_head, previous_settled_at = row
    if status != SubmissionStatus.QUEUED:
        raise ClaimLost(submission_id, f"cannot claim: status is {SubmissionStatus(status)}")
    if not is_head:
        raise ClaimLost(
            submission_id, "cannot claim: an earlier submission of its session is unsettled"
        )
    stamp: tuple[str, ...] = ()
    if serves is not None:
        served = served_version(agent, version, serves)
        if served is None:
            raise ClaimLost(
                submission_id,
                f"cannot claim: version {version!r} of agent {agent!r} is not served here",
            )
        stamp = (served,)
    fence = mint_fence(conn, conversation_id)
    # ``number`` orders the attempt markers; ``attempt_count`` is the budget (a refund lowers it).
    (number,) = conn.execute(
        "SELECT COUNT(*) + 1 FROM attempts WHERE submission_id = ?", (submission_id,)
    ).fetchone()
    conn.execute(
        "INSERT INTO attempts (submission_id, number, id, owner_id, fence, started_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (submission_id, number, attempt_id, owner_id, fence, started_at(now, previous_settled_at)),
    )
    return update_owned(
        conn,
        submission_id,
        None,
        "claim",
        "status = 'running', attempt_count = attempt_count + 1, attempt_id = ?, owner_id = ?, "
        "lease_expires_at = ?, fence = ?, wait_reason = NULL" + (", version = ?" if stamp else ""),
        (attempt_id, owner_id, to_micros(lease_expires_at), fence, *stamp),
        from_status=SubmissionStatus.QUEUED,
    )


def claim_runnable(
    conn: sqlite3.Connection,
    attempt_ids: Sequence[str],
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
    serves: VersionsServed | None = None,
    held: HeldBack | None = None,
) -> list[ClaimedHead]:
    # One write transaction: no other writer can take these heads, or admit behind them,
    # in between.
    query = _runnable("id, conversation_id", len(attempt_ids), serves, held)
    heads = conn.execute(*query).fetchall()
    return [
        ClaimedHead(
            claim(conn, head_id, attempt_id, owner_id, lease_expires_at, now, serves),
            alone=conn.execute(_QUEUED_BEHIND, (conversation_id,)).fetchone() is None,
        )
        for (head_id, conversation_id), attempt_id in zip(heads, attempt_ids, strict=False)
    ]


_QUEUED_BEHIND = (
    "SELECT 1 FROM submissions WHERE conversation_id = ? AND status != 'settled' "
    "AND status = 'queued' LIMIT 1"
)


def any_due(conn: sqlite3.Connection, now: datetime) -> bool:
    """Whether a scheduled submission is due at ``now`` (``release_due``'s hint)."""
    return (
        conn.execute(
            "SELECT 1 FROM submissions WHERE status = 'scheduled' AND wait_until <= ? LIMIT 1",
            (to_micros(now),),
        ).fetchone()
        is not None
    )


def release_due(conn: sqlite3.Connection, now: datetime) -> list[Submission]:
    """Scheduled → queued for those due at or before ``now`` (see ``TimerStore``)."""
    due = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM submissions WHERE status = 'scheduled' AND wait_until <= ? "
            "ORDER BY position",
            (to_micros(now),),
        )
    ]
    return [
        update_owned(
            conn,
            submission_id,
            None,
            "release when due",
            "status = 'queued'",
            (),
            from_status=SubmissionStatus.SCHEDULED,
        )
        for submission_id in due
    ]


def next_due(conn: sqlite3.Connection) -> datetime | None:
    """The earliest due time of a scheduled or a waiting submission (see ``TimerStore``)."""
    row = conn.execute(
        "SELECT MIN(wait_until) FROM submissions WHERE status IN ('scheduled', 'waiting') "
        "AND wait_until IS NOT NULL"
    ).fetchone()
    return None if row is None or row[0] is None else from_micros(row[0])


def list_attempts(conn: sqlite3.Connection, submission_id: str) -> list[Attempt]:
    get_submission(conn, submission_id)
    rows = conn.execute(
        "SELECT id, submission_id, owner_id, fence, number, started_at FROM attempts "
        "WHERE submission_id = ? ORDER BY number",
        (submission_id,),
    ).fetchall()
    return [Attempt(r[0], r[1], r[2], r[3], r[4], from_micros(r[5])) for r in rows]


def renew_lease(
    conn: sqlite3.Connection, submission_id: str, attempt_id: str, lease: datetime
) -> Submission:
    return update_owned(
        conn,
        submission_id,
        attempt_id,
        "renew the lease",
        "lease_expires_at = ?",
        (to_micros(lease),),
    )


def release(
    conn: sqlite3.Connection,
    submission_id: str,
    attempt_id: str,
    last_error: str | None,
    refund_attempt: bool,
) -> Submission:
    return update_owned(
        conn,
        submission_id,
        attempt_id,
        "release",
        "status = 'queued', attempt_id = NULL, owner_id = NULL, lease_expires_at = NULL, "
        "last_error = COALESCE(?, last_error), attempt_count = attempt_count - ?",
        (last_error, 1 if refund_attempt else 0),
    )


def park(
    conn: sqlite3.Connection,
    submission_id: str,
    attempt_id: str,
    reason: str,
    expected_seq: int | None,
    wait_until: datetime | None,
) -> Submission:
    # One transaction: the head (and the children) read here are those when the park commits.
    current = get_submission(conn, submission_id)
    over = expected_seq is not None and head(conn, current.conversation_id) != expected_seq
    if reason == WAIT_FOR_CHILDREN and not over:
        over = not has_unsettled_children(conn, submission_id)
    return update_owned(
        conn,
        submission_id,
        attempt_id,
        "park",
        "status = CASE WHEN ? OR cancel_requested_at IS NOT NULL THEN 'queued' ELSE 'waiting' "
        "END, attempt_id = NULL, owner_id = NULL, lease_expires_at = NULL, wait_reason = ?, "
        "wait_until = ?, attempt_count = attempt_count - 1",
        (over, reason, None if wait_until is None else to_micros(wait_until)),
    )


def unpark(conn: sqlite3.Connection, submission_id: str) -> Submission:
    return update_owned(
        conn,
        submission_id,
        None,
        "unpark",
        "status = 'queued'",
        (),
        from_status=SubmissionStatus.WAITING,
    )


def request_cancel(
    conn: sqlite3.Connection, submission_id: str, now: datetime, by: Actor | None = None
) -> Submission:
    # A waiting submission is requeued: nothing it waits for will come. Who asked is kept
    # with the first stamp.
    conn.execute(
        "UPDATE submissions SET "
        "cancel_requested_by = CASE WHEN cancel_requested_at IS NULL THEN ? "
        "ELSE cancel_requested_by END, "
        "cancel_requested_at = COALESCE(cancel_requested_at, ?), "
        "status = CASE WHEN status IN ('waiting', 'scheduled') THEN 'queued' ELSE status END "
        "WHERE id = ? AND status != 'settled'",
        (actor_json(by), to_micros(now), submission_id),
    )
    return get_submission(conn, submission_id)


def reserve_settlement(
    conn: sqlite3.Connection, submission_id: str, attempt_id: str, settlement: Mapping[str, Any]
) -> Submission:
    return update_owned(
        conn,
        submission_id,
        attempt_id,
        "reserve the settlement",
        "status = 'terminalizing', lease_expires_at = NULL, settlement = ?",
        (canonical_json(settlement),),
    )


def settle_absorbed(
    conn: sqlite3.Connection, submission_id: str, settlement: Mapping[str, Any], now: datetime
) -> Submission:
    payload = canonical_json(settlement)
    current = get_submission(conn, submission_id)
    if current.status is SubmissionStatus.SETTLED:
        return current
    return settled(
        conn,
        update_owned(
            conn,
            submission_id,
            None,
            "settle as absorbed",
            "status = 'settled', settlement = ?, settled_at = ?",
            (payload, to_micros(now)),
            from_status=SubmissionStatus.QUEUED,
        ),
    )


def finalize_settlement(conn: sqlite3.Connection, submission_id: str, now: datetime) -> Submission:
    current = get_submission(conn, submission_id)
    if current.status is SubmissionStatus.SETTLED:
        return current
    return settled(
        conn,
        update_owned(
            conn,
            submission_id,
            None,
            "finalize",
            "status = 'settled', settled_at = ?",
            (to_micros(now),),
            from_status=SubmissionStatus.TERMINALIZING,
        ),
    )


def settled(conn: sqlite3.Connection, submission: Submission) -> Submission:
    """After ``submission`` settled, in its transaction: the wake of its parent, if it has
    one (see ``SubmissionStore``); nothing more for a root submission."""
    if submission.parent_submission_id is not None:
        wake_parent(conn, submission.parent_submission_id)
    return submission


def owner_has_claims(conn: sqlite3.Connection, owner_id: str) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM submissions WHERE status = 'running' AND owner_id = ? LIMIT 1",
            (owner_id,),
        ).fetchone()
    )
