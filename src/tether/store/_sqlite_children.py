"""The SQL of child submissions: a submission's children, the wake of a parent waiting for
them, the waits past their deadline, and a tree's total, as plain functions over a
connection.

Each query is served by a partial index of the v9 schema (``submissions_children``,
``submissions_wait_deadlines``): rows of root submissions, and waits without a deadline, are
not in them (the walk up to a tree's root goes by the primary key). The wake runs on the
writer's connection inside the transaction that settles a child, and only for a child: a root
submission's settlement runs no statement more.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from tether.errors import SubagentLimitReached
from tether.store._common import (
    SUBMISSION_COLUMNS,
    TREE_ROOT,
    TREE_SIZE,
    from_micros,
    submission_from_row,
    to_micros,
)
from tether.store._types import WAIT_FOR_CHILDREN, Submission

__all__ = (
    "check_tree_total",
    "has_unsettled_children",
    "list_children",
    "list_expired_waits",
    "submission",
    "wake_parent",
)


def _moment(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def submission(row: tuple[Any, ...]) -> Submission:
    """A row of ``SUBMISSION_COLUMNS`` (times as integer microseconds) as a submission."""
    return submission_from_row(row, _moment)


def list_children(conn: sqlite3.Connection, submission_id: str) -> list[Submission]:
    rows = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions WHERE parent_submission_id = ? "
        "ORDER BY position",
        (submission_id,),
    ).fetchall()
    return [submission(row) for row in rows]


def list_expired_waits(conn: sqlite3.Connection, now: datetime) -> list[Submission]:
    # Named: without statistics the planner prefers ``submissions_by_status`` for the
    # equality on the status, and would read every waiting submission, deadline or not.
    # (``status = 'waiting'`` is a literal, as the partial index spells it.)
    rows = conn.execute(
        f"SELECT {SUBMISSION_COLUMNS} FROM submissions INDEXED BY submissions_wait_deadlines "
        "WHERE status = 'waiting' AND wait_until <= ? ORDER BY position",
        (to_micros(now),),
    ).fetchall()
    return [submission(row) for row in rows]


def has_unsettled_children(conn: sqlite3.Connection, submission_id: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM submissions WHERE parent_submission_id = ? AND status <> 'settled' "
            "LIMIT 1",
            (submission_id,),
        ).fetchone()
        is not None
    )


_TREE_ROOT = TREE_ROOT.format(param="?")
_TREE_SIZE = TREE_SIZE.format(param="?")


def check_tree_total(conn: sqlite3.Connection, parent_id: str, limit: int) -> None:
    """``SubagentLimitReached`` if the tree ``parent_id`` belongs to holds ``limit``
    submissions below its root already; in the admission's transaction, which the single
    writer (and ``BEGIN IMMEDIATE`` across processes) serializes with every other."""
    row = conn.execute(_TREE_ROOT, (parent_id,)).fetchone()
    if row is None:  # a parent (or an ancestor) this store does not hold: nothing to bound
        return
    root = row[0]
    if conn.execute(_TREE_SIZE, (root,)).fetchone()[0] >= limit:
        raise SubagentLimitReached(root, limit)


def wake_parent(conn: sqlite3.Connection, parent_id: str) -> None:
    """Requeue ``parent_id`` if it waits for its children and none is unsettled any more: in
    the transaction that settled one of them, after it did."""
    conn.execute(
        "UPDATE submissions SET status = 'queued' WHERE id = ?1 AND status = 'waiting' "
        "AND wait_reason = ?2 AND NOT EXISTS (SELECT 1 FROM submissions c "
        "WHERE c.parent_submission_id = ?1 AND c.status <> 'settled')",
        (parent_id, WAIT_FOR_CHILDREN),
    )
