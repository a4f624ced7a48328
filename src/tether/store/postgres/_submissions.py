"""The SQL of the PostgreSQL store's submissions: reads, claims, leases, settlement (their
admission is ``_admission``'s).

Claims take session heads with ``FOR UPDATE SKIP LOCKED``; every state change is one
conditional ``UPDATE`` (owned by an attempt where the contract says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson
from psycopg.rows import TupleRow

from tether._payloads import AttachmentRef
from tether.errors import AttachmentNotFound, ClaimLost, SubmissionNotFound
from tether.store._common import (
    SUBMISSION_COLUMNS,
    attachment_ref,
    submission_filter,
    submission_from_row,
)
from tether.store._limits import HeldBack
from tether.store._types import Attempt, ClaimedHead, Submission, SubmissionStatus
from tether.store._versions import VersionsServed, served_version, serves_json
from tether.store.postgres._children import wake_parent
from tether.store.postgres._log import Conn

__all__ = (
    "COLUMN_COUNT",
    "claim",
    "claim_runnable",
    "get_attachment",
    "get_submission",
    "list_attempts",
    "list_expired_leases",
    "list_runnable",
    "list_submissions",
    "put_attachment",
    "submission",
    "update_owned",
)

# The oldest unsettled submission of its conversation is the only one that may run, and
# only while nothing else of its session runs or waits: an admission that committed after a
# later one of the same session was claimed (positions are drawn at insert, visibility
# comes at commit) waits for that run to end instead of running beside it. A later one
# still ``scheduled`` (a delayed dispatch not yet due) neither runs nor waits.
_HEAD_OF_SESSION = (
    "NOT EXISTS (SELECT 1 FROM submissions e WHERE e.conversation_id = s.conversation_id "
    "AND e.status <> 'settled' "
    "AND (e.position < s.position OR e.status NOT IN ('queued', 'scheduled')))"
)


COLUMN_COUNT = len(SUBMISSION_COLUMNS.split(","))
"""How many leading columns of a row are the submission's (``SUBMISSION_COLUMNS``)."""

# --- submissions ----------------------------------------------------------------------


def submission(row: TupleRow) -> Submission:
    return submission_from_row(row, _same)


def _same(moment: datetime | None) -> datetime | None:
    return moment  # timestamptz columns arrive as aware datetimes


async def get_submission(conn: Conn, submission_id: str, *, lock: bool = False) -> Submission:
    row = await (
        await conn.execute(
            f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE id = %s"
            + (" FOR UPDATE" if lock else ""),
            (submission_id,),
        )
    ).fetchone()
    if row is None:
        raise SubmissionNotFound(submission_id)
    return submission(row)


async def list_submissions(
    conn: Conn,
    status: SubmissionStatus | None,
    conversation_id: str | None,
    unsettled: bool,
    tenant: str | None = None,
) -> list[Submission]:
    if tenant is not None and "\x00" in tenant:
        return []  # no text column holds a NUL: nothing matches (and libpq cannot send it)
    where, params = submission_filter(status, conversation_id, unsettled, "%s", tenant)
    rows = await (
        await conn.execute(
            f"SELECT {SUBMISSION_COLUMNS} FROM submissions {where}ORDER BY position", params
        )
    ).fetchall()
    return [submission(row) for row in rows]


async def list_runnable(conn: Conn, limit: int) -> list[Submission]:
    rows = await (
        await conn.execute(
            f"SELECT {SUBMISSION_COLUMNS} FROM submissions s WHERE status = 'queued' AND "
            f"{_HEAD_OF_SESSION} ORDER BY claim_rank, position LIMIT %s",
            (limit,),
        )
    ).fetchall()
    return [submission(row) for row in rows]


async def list_expired_leases(conn: Conn, now: datetime) -> list[Submission]:
    rows = await (
        await conn.execute(
            f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE status = 'running' "
            "AND lease_expires_at <= %s ORDER BY position",
            (now,),
        )
    ).fetchall()
    return [submission(row) for row in rows]


async def update_owned(
    conn: Conn,
    submission_id: str,
    attempt_id: str | None,
    action: str,
    assignments: str,
    params: tuple[Any, ...],
    *,
    from_status: SubmissionStatus = SubmissionStatus.RUNNING,
    notify: str | None = None,
    wake: str | None = None,
) -> Submission:
    """Apply ``assignments`` if in ``from_status`` (and owned by ``attempt_id``, if given),
    and NOTIFY ``notify`` with the submission id if it applied: one statement. A settlement
    gives ``wake``, the work channel: a settled child wakes its parent in the statement
    (``_children``)."""
    woken = "" if wake is None else f", {wake_parent('changed.parent_submission_id', '%s')}"
    row = await (
        await conn.execute(
            f"WITH changed AS (UPDATE submissions SET {assignments} WHERE id = %s "
            "AND status = %s AND (%s::text IS NULL OR attempt_id = %s) "
            f"RETURNING {SUBMISSION_COLUMNS}) "
            "SELECT changed.*, CASE WHEN %s::text IS NULL THEN NULL "
            f"ELSE pg_notify(%s, changed.id) END{woken} FROM changed",
            (
                *params,
                submission_id,
                from_status.value,
                attempt_id,
                attempt_id,
                notify,
                notify,
                *(() if wake is None else (wake,)),
            ),
        )
    ).fetchone()
    if row is None:
        current = await get_submission(conn, submission_id)  # raises SubmissionNotFound
        owner = f" under attempt {attempt_id}" if attempt_id is not None else ""
        raise ClaimLost(
            submission_id,
            f"cannot {action}: status {current.status}, attempt {current.attempt_id}, "
            f"not {from_status}{owner}",
        )
    return submission(row[:COLUMN_COUNT])


async def claim(
    conn: Conn,
    submission_id: str,
    attempt_id: str,
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
    serves: VersionsServed | None = None,
) -> Submission:
    params: dict[str, Any] = {
        "id": submission_id,
        "attempt_ids": _json_ids([attempt_id]),
        "owner": owner_id,
        "now": now,
        "lease": lease_expires_at,
    }
    if serves is not None:
        params["serves"] = serves_json(serves).decode()
    row = await (await conn.execute(_CLAIM_ONE[serves is not None], params)).fetchone()
    if row is not None:
        return submission(row[:COLUMN_COUNT])
    current = await get_submission(conn, submission_id)  # SubmissionNotFound
    if current.status is not SubmissionStatus.QUEUED:
        raise ClaimLost(submission_id, f"cannot claim: status is {current.status}")
    if serves is not None and served_version(current.key.agent, current.version, serves) is None:
        raise ClaimLost(
            submission_id,
            f"cannot claim: version {current.version!r} of agent {current.key.agent!r} "
            "is not served here",
        )
    raise ClaimLost(
        submission_id, "cannot claim: an earlier submission of its session is unsettled"
    )


_CLAIMED_COLUMNS = ", ".join(f"s.{column.strip()}" for column in SUBMISSION_COLUMNS.split(","))
_CLAIM = """
WITH heads AS (
    SELECT s.id, s.conversation_id, s.position, s.claim_rank FROM submissions s
    WHERE {which} AND s.status = 'queued' AND {served}{held}{head}
    {lock_heads}
), free AS (
    SELECT c.id FROM conversations c WHERE c.id IN (SELECT conversation_id FROM heads)
    {lock_conversations}
), numbered AS (
    SELECT h.id, h.conversation_id, h.position,
           row_number() OVER (ORDER BY h.claim_rank, h.position) AS k
    FROM heads h JOIN free f ON f.id = h.conversation_id
), fenced AS (
    -- One head per session, so one conversation per head: each gets a fresh fence.
    UPDATE conversations c SET fence = c.fence + 1 FROM numbered n
    WHERE c.id = n.conversation_id RETURNING c.id AS conversation_id, c.fence
), chosen AS (
    SELECT n.id, n.conversation_id, n.position, f.fence,
           %(attempt_ids)s::jsonb ->> (n.k::int - 1) AS attempt_id
    FROM numbered n JOIN fenced f USING (conversation_id)
), markers AS (
    -- Not before the previous submission of the session settled: the caller read "now"
    -- before waiting for this claim, perhaps before that settlement made the head free.
    INSERT INTO attempts (submission_id, number, id, owner_id, fence, started_at)
    SELECT c.id, (SELECT COUNT(*) + 1 FROM attempts a WHERE a.submission_id = c.id),
           c.attempt_id, %(owner)s, c.fence,
           GREATEST(%(now)s, (SELECT p.settled_at FROM submissions p
                              WHERE p.conversation_id = c.conversation_id
                              AND p.position < c.position
                              ORDER BY p.position DESC LIMIT 1))
    FROM chosen c
)
UPDATE submissions s SET status = 'running', attempt_count = s.attempt_count + 1,
    attempt_id = c.attempt_id, owner_id = %(owner)s, lease_expires_at = %(lease)s,
    fence = c.fence, wait_reason = NULL{stamp}
FROM chosen c WHERE s.id = c.id
RETURNING {columns},
    NOT EXISTS (SELECT 1 FROM submissions q WHERE q.conversation_id = s.conversation_id
                AND q.status <> 'settled' AND q.status = 'queued' AND q.id <> s.id),
    s.claim_rank, s.position
"""
# With ``serves`` (a JSON object: agent -> versions, newest first), ``served_version`` in
# SQL: a head is taken only if its agent is served and its version is unset, listed, or
# matched by "*" (the filter is part of the scan: an unservable head is passed over, and
# never counted against the batch); the update stamps the first version listed unless its
# own is listed.
_SERVES = "(%(serves)s::jsonb -> s.agent)"
# Asked as ``CASE ... END IS NOT NULL``, on purpose: the planner guesses a test of a jsonb
# lookup to hold for few rows, and for a condition it guesses rare it reads every queued
# head and sorts them (claims ran three times slower at 2,000 queued); a CASE it
# cannot see into, tested for NULL, it guesses holds for nearly every row (as it does), so
# it reads the queued heads in order until the batch is full, as the claim without versions
# does. (The CASE is NULL, the head passed over, for an agent not served too.)
_SERVED = (
    f"(CASE WHEN {_SERVES} IS NOT NULL AND (s.version IS NULL OR {_SERVES} ? s.version "
    f"OR {_SERVES} ? '*') THEN 1 END) IS NOT NULL AND "
)
_STAMP = (
    f", version = CASE WHEN s.version IS NOT NULL AND {_SERVES} ? s.version THEN s.version "
    f"ELSE {_SERVES} ->> 0 END"
)


# Limits (docs/limits.md): a head whose agent or tenant is at its limit of runs in flight is
# passed over, its own condition beside the rest (each list holds the few names at their
# limit; most rows pass it, as the planner guesses of a NOT ... = ANY).
_HELD = (
    "NOT (s.agent = ANY(%(held_agents)s::text[])) AND "
    "(s.tenant IS NULL OR NOT (s.tenant = ANY(%(held_tenants)s::text[]))) AND "
)


def _claim_statement(which: str, lock: str, *, versioned: bool, held: bool = False) -> str:
    return _CLAIM.format(
        which=which,
        served=_SERVED if versioned else "",
        held=_HELD if held else "",
        head=_HEAD_OF_SESSION,
        # Priorities: claim order is (claim_rank, position), read in that order from the
        # partial index of the queued rows (``submissions_queued_by_rank``), as ``position``
        # was from ``submissions_queued``: no expression of the clock, aging is in the rank.
        lock_heads=lock.format(limit="ORDER BY s.claim_rank, s.position LIMIT %(n)s "),
        lock_conversations=lock.format(limit=""),
        columns=_CLAIMED_COLUMNS,
        stamp=_STAMP if versioned else "",
    )


# A batch: SKIP LOCKED, so workers claiming at once take disjoint heads, and a conversation
# locked by another transaction (an append, or a writer frozen inside one) is left for a
# later pass instead of stalling every other claim behind it. Indexed by whether it is
# versioned (``serves`` given); without, the statement is the same as before versions.
_CLAIM_HEADS = tuple(
    _claim_statement("TRUE", "{limit}FOR UPDATE SKIP LOCKED", versioned=versioned)
    for versioned in (False, True)
)
# The same, holding back what limits name (indexed the same way).
_CLAIM_HEADS_HELD = tuple(
    _claim_statement("TRUE", "{limit}FOR UPDATE SKIP LOCKED", versioned=versioned, held=True)
    for versioned in (False, True)
)
# One named submission: it waits for its locks (a racing claim then finds it taken).
_CLAIM_ONE = tuple(
    _claim_statement("s.id = %(id)s", "FOR UPDATE", versioned=versioned)
    for versioned in (False, True)
)


def _json_ids(attempt_ids: Sequence[str]) -> str:
    return orjson.dumps(list(attempt_ids)).decode()


async def claim_runnable(
    conn: Conn,
    attempt_ids: Sequence[str],
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
    serves: VersionsServed | None = None,
    held: HeldBack | None = None,
) -> list[ClaimedHead]:
    # One statement for the whole batch. SKIP LOCKED: workers claiming at once take disjoint
    # heads instead of queueing on each other's locks.
    params: dict[str, Any] = {
        "n": len(attempt_ids),
        # One JSON text, not a text[]: psycopg dumps an array element by element, and a claim
        # asks with an id for every free slot (64 by default).
        "attempt_ids": _json_ids(attempt_ids),
        "owner": owner_id,
        "now": now,
        "lease": lease_expires_at,
    }
    if serves is not None:
        params["serves"] = serves_json(serves).decode()
    statements = _CLAIM_HEADS
    if held:
        statements = _CLAIM_HEADS_HELD
        params["held_agents"] = sorted(held.agents)
        params["held_tenants"] = sorted(held.tenants)
    rows = await (await conn.execute(statements[serves is not None], params)).fetchall()
    return [
        ClaimedHead(submission(row[:COLUMN_COUNT]), alone=row[COLUMN_COUNT])
        for row in sorted(rows, key=lambda row: (row[-2], row[-1]))  # claim order
    ]


async def list_attempts(conn: Conn, submission_id: str) -> list[Attempt]:
    await get_submission(conn, submission_id)
    rows = await (
        await conn.execute(
            "SELECT id, submission_id, owner_id, fence, number, started_at FROM attempts "
            "WHERE submission_id = %s ORDER BY number",
            (submission_id,),
        )
    ).fetchall()
    return [Attempt(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]


# --- attachments ----------------------------------------------------------------------


async def put_attachment(conn: Conn, data: bytes, media_type: str) -> AttachmentRef:
    ref = attachment_ref(data, media_type)
    await conn.execute(
        "INSERT INTO attachments (digest, media_type, size, data) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT (digest) DO NOTHING",
        (ref.digest, ref.media_type, ref.size, data),
    )
    return (await get_attachment(conn, ref.digest))[0]


async def get_attachment(conn: Conn, digest: str) -> tuple[AttachmentRef, bytes]:
    row = await (
        await conn.execute(
            "SELECT media_type, size, data FROM attachments WHERE digest = %s", (digest,)
        )
    ).fetchone()
    if row is None:
        raise AttachmentNotFound(digest)
    return AttachmentRef(digest=digest, media_type=row[0], size=row[1]), bytes(row[2])
