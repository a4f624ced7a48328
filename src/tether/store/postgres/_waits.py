"""Parking and cancelling on PostgreSQL: the two transactions that lock a submission's row
before they look at what it waits for (its log's head, its children)."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from tether.records import Actor
from tether.store._common import SUBMISSION_COLUMNS
from tether.store._gates_sql import actor_json
from tether.store._types import WAIT_FOR_CHILDREN, Submission, SubmissionStatus
from tether.store.postgres import _log, _submissions
from tether.store.postgres._children import UNSETTLED_CHILDREN
from tether.store.postgres._log import Conn

__all__ = ("next_due", "park", "release_due", "request_cancel")

_RETURNED = ", ".join(f"s.{column.strip()}" for column in SUBMISSION_COLUMNS.split(",")) + (
    ", s.position"
)


async def park(
    conn: Conn,
    *,
    work: str,
    submission_id: str,
    attempt_id: str,
    reason: str,
    expected_seq: int | None,
    wait_until: datetime | None,
) -> Submission:
    """Running → waiting (or, when the wait is already over, queued) for the owning attempt."""
    # The claim's row first (as append_decision and a settling child lock it), then the
    # head and the children in statements of their own: a decision, or the settlement
    # of a last child, committed while we waited for the row is seen.
    row = await (
        await conn.execute(
            "SELECT conversation_id FROM submissions WHERE id = %s FOR UPDATE",
            (submission_id,),
        )
    ).fetchone()
    moved = False
    if row is not None and expected_seq is not None:
        moved = await _log.head(conn, row[0]) != expected_seq
    # Nothing to wait for if no child is unsettled (they may all have settled first).
    over = (
        f" OR NOT {UNSETTLED_CHILDREN.format(parent='submissions.id')}"
        if reason == WAIT_FOR_CHILDREN
        else ""
    )
    return await _submissions.update_owned(
        conn,
        submission_id,
        attempt_id,
        "park",
        "status = CASE WHEN %s::boolean OR cancel_requested_at IS NOT NULL"
        f"{over} THEN 'queued' ELSE 'waiting' END, attempt_id = NULL, owner_id = NULL, "
        "lease_expires_at = NULL, wait_reason = %s, wait_until = %s, "
        "attempt_count = attempt_count - 1",
        (moved, reason, wait_until),
        notify=work,
    )


async def request_cancel(
    conn: Conn, *, work: str, submission_id: str, now: datetime, by: Actor | None = None
) -> tuple[Submission, bool]:
    """Stamp the cancel; a waiting submission is requeued (returned: whether it was)."""
    row = await (
        await conn.execute(
            "SELECT status FROM submissions WHERE id = %s FOR UPDATE", (submission_id,)
        )
    ).fetchone()
    waiting = row is not None and row[0] in (
        SubmissionStatus.WAITING.value,
        SubmissionStatus.SCHEDULED.value,
    )
    # A waiting submission is requeued: nothing it waits for will come. So is a scheduled
    # one: its next claim settles it aborted, without running it.
    await conn.execute(
        "UPDATE submissions SET "
        "cancel_requested_by = CASE WHEN cancel_requested_at IS NULL THEN %s "
        "ELSE cancel_requested_by END, "
        "cancel_requested_at = COALESCE(cancel_requested_at, %s), "
        "status = CASE WHEN status IN ('waiting', 'scheduled') THEN 'queued' "
        "ELSE status END WHERE id = %s AND status <> 'settled'",
        (actor_json(by), now, submission_id),
    )
    if waiting:
        await _log.notify(conn, work, submission_id)
    return await _submissions.get_submission(conn, submission_id), waiting


async def release_due(conn: Conn, *, work: str, now: datetime) -> list[Submission]:
    """Scheduled → queued for those due at or before ``now``, one statement, each row
    once (a peer's concurrent release skips the rows this one locked); NOTIFY ``work``."""
    rows = await (
        await conn.execute(
            "WITH due AS (SELECT id FROM submissions WHERE status = 'scheduled' "
            "AND wait_until <= %s ORDER BY position FOR UPDATE SKIP LOCKED), "
            "changed AS (UPDATE submissions s SET status = 'queued' FROM due "
            "WHERE s.id = due.id AND s.status = 'scheduled' "
            f"RETURNING {_RETURNED}) "
            "SELECT changed.*, pg_notify(%s, changed.id) FROM changed ORDER BY position",
            (now, work),
        )
    ).fetchall()
    return [_submissions.submission(row[: _submissions.COLUMN_COUNT]) for row in rows]


async def next_due(conn: Conn) -> datetime | None:
    """The earliest ``wait_until`` of a scheduled or waiting submission (both indexed)."""
    row = await (
        await conn.execute(
            "SELECT LEAST("
            "(SELECT MIN(wait_until) FROM submissions WHERE status = 'scheduled'), "
            "(SELECT MIN(wait_until) FROM submissions "
            "WHERE status = 'waiting' AND wait_until IS NOT NULL))"
        )
    ).fetchone()
    return None if row is None else cast(datetime | None, row[0])
