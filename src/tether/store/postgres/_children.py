"""Child submissions on PostgreSQL: a submission's children, the waits past their deadline,
the wake of a parent waiting for its children, in the commit that settles the last one, and
a tree's total, counted under its root's lock.

**The wake.** Every statement that settles a submission calls ``wake_parent`` (a function of
the v6 schema) with the settled row's ``parent_submission_id``. It is ``STRICT``: for a root
submission (no parent) it is not even called, so the hot path runs nothing more. For a child
it locks the parent's row, then requeues the parent if it waits for ``children`` and none of
them is unsettled any more.

Why a function, not one more CTE: under READ COMMITTED a statement reads the snapshot taken
when it began, whatever locks it waits for on the way. Two last children settling at once
would each read the other as unsettled, and neither wake the parent. A PL/pgSQL function
runs each of its statements with a fresh snapshot, so its check, begun once it holds the
parent's lock, sees every sibling settled by a transaction that held that lock before (the
lock is held to the settling transaction's commit). A park for children takes the same row
lock before its own check (``PostgresStore.park``), so a park and a settling last child
cannot both miss each other either. The locks are taken child first, then parent: upwards
only, so no cycle.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether.errors import SubagentLimitReached
from tether.store._common import SUBMISSION_COLUMNS, TREE_ROOT, TREE_SIZE, submission_from_row
from tether.store._types import WAIT_FOR_CHILDREN, Submission

__all__ = (
    "UNSETTLED_CHILDREN",
    "WAKE_PARENT_FUNCTION",
    "check_tree_total",
    "list_children",
    "list_expired_waits",
    "lock_tree_root",
    "wake_parent",
)

Conn = AsyncConnection[TupleRow]

UNSETTLED_CHILDREN: Final = (
    "EXISTS (SELECT 1 FROM submissions c WHERE c.parent_submission_id = {parent} "
    "AND c.status <> 'settled')"
)
"""Whether the submission ``{parent}`` (an SQL expression) has an unsettled child: served by
the ``submissions_children`` index."""

WAKE_PARENT_FUNCTION: Final = f"""
    CREATE OR REPLACE FUNCTION wake_parent(parent_id TEXT, channel TEXT) RETURNS BOOLEAN
        LANGUAGE plpgsql VOLATILE STRICT SET search_path FROM CURRENT
    AS $wake$
    BEGIN
        -- The lock first; the check then reads a snapshot taken once it is held.
        PERFORM 1 FROM submissions WHERE id = parent_id FOR NO KEY UPDATE;
        UPDATE submissions SET status = 'queued'
        WHERE id = parent_id AND status = 'waiting' AND wait_reason = '{WAIT_FOR_CHILDREN}'
          AND NOT {UNSETTLED_CHILDREN.format(parent="parent_id")};
        IF NOT FOUND THEN
            RETURN FALSE;
        END IF;
        PERFORM pg_notify(channel, parent_id);  -- delivered at commit, as every NOTIFY
        RETURN TRUE;
    END
    $wake$;
"""
"""The wake (see the module's docstring), created by the v6 migration in the store's schema;
it resolves ``submissions`` in that schema whatever the caller's search path."""


_LOCK_TREE_ROOT: Final = (
    f"SELECT id FROM submissions WHERE id = ({TREE_ROOT.format(param='%s')}) FOR NO KEY UPDATE"
)
_TREE_SIZE: Final = TREE_SIZE.format(param="%s")


async def lock_tree_root(conn: Conn, parent_id: str) -> str | None:
    """The root of the subagent tree ``parent_id`` belongs to, its row locked to the end of
    the transaction (``None`` if this store does not hold the parent or an ancestor): every
    admission into one tree takes this lock before it counts, so two cannot both count the
    same total. It is the one existing row an admission locks (its other writes are new
    rows), so while it holds it, it waits for no other lock of the tree."""
    row = await (await conn.execute(_LOCK_TREE_ROOT, (parent_id,))).fetchone()
    return None if row is None else str(row[0])


async def check_tree_total(conn: Conn, root: str, limit: int) -> None:
    """``SubagentLimitReached`` if ``limit`` submissions stand below ``root`` already. A
    statement of its own, after the root's lock: its snapshot then holds every child an
    admission that held the lock before committed."""
    row = await (await conn.execute(_TREE_SIZE, (root,))).fetchone()
    if row is not None and row[0] >= limit:
        raise SubagentLimitReached(root, limit)


def wake_parent(parent: str, channel: str) -> str:
    """The SQL expression that wakes the parent ``parent`` (an SQL expression, the settled
    row's ``parent_submission_id``), notifying ``channel`` (an SQL expression, the work
    channel) if it did: true if woken, NULL for a root submission."""
    return f"wake_parent({parent}, {channel})"


def _same(moment: datetime | None) -> datetime | None:
    return moment  # timestamptz columns arrive as aware datetimes


def _submission(row: tuple[Any, ...]) -> Submission:
    return submission_from_row(row, _same)


async def list_children(conn: Conn, submission_id: str) -> list[Submission]:
    rows = await (
        await conn.execute(
            f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE parent_submission_id = %s "
            "ORDER BY position",
            (submission_id,),
        )
    ).fetchall()
    return [_submission(row) for row in rows]


async def list_expired_waits(conn: Conn, now: datetime) -> list[Submission]:
    # ``status = 'waiting'`` as a literal, as the partial index spells it.
    rows = await (
        await conn.execute(
            f"SELECT {SUBMISSION_COLUMNS} FROM submissions "
            "WHERE status = 'waiting' AND wait_until <= %s ORDER BY position",
            (now,),
        )
    ).fetchall()
    return [_submission(row) for row in rows]
