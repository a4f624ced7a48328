"""The SQL of agent versions (``VersionStore``) on SQLite: a submission's version moved by
CAS, the unsettled submissions counted by version, and the workers table, as plain
functions over a connection (writes on the writer's, inside its transaction)."""

from __future__ import annotations

import sqlite3
from datetime import datetime

import orjson

from tether.errors import VersionConflict
from tether.store._common import SUBMISSION_COLUMNS, from_micros, to_micros
from tether.store._sqlite_children import submission as _submission
from tether.store._sqlite_submissions import get_submission
from tether.store._types import Submission
from tether.store._versions import (
    VersionCount,
    VersionsServed,
    WorkerRow,
    count_order,
    frozen_serves,
    serves_json,
)

__all__ = ("delete_worker", "list_workers", "put_worker", "set_version", "version_counts")


def set_version(
    conn: sqlite3.Connection, submission_id: str, expected: str | None, version: str
) -> Submission:
    row = conn.execute(
        "UPDATE submissions SET version = ? WHERE id = ? AND status IN ('queued', 'waiting') "
        f"AND version IS ? RETURNING {SUBMISSION_COLUMNS}",
        (version, submission_id, expected),
    ).fetchone()
    if row is not None:
        return _submission(row)
    current = get_submission(conn, submission_id)  # SubmissionNotFound
    raise VersionConflict(
        submission_id, expected=expected, actual=current.version, status=current.status.value
    )


def version_counts(conn: sqlite3.Connection, agent: str | None) -> list[VersionCount]:
    # Named, with ``status != 'settled'`` as the partial index spells it: the unsettled
    # submissions only. Left to itself, the planner groups along the unique index led by the
    # agent and reads every submission ever admitted.
    rows = conn.execute(
        "SELECT agent, version, status, wait_reason, COUNT(*) FROM submissions "
        "INDEXED BY submissions_open WHERE status != 'settled' AND status != 'terminalizing' "
        "AND (? IS NULL OR agent = ?) "
        "GROUP BY agent, version, status, wait_reason",
        (agent, agent),
    ).fetchall()
    return sorted((VersionCount(*row) for row in rows), key=count_order)


def put_worker(
    conn: sqlite3.Connection, owner_id: str, serves: VersionsServed, now: datetime
) -> None:
    # ``since`` moves only when what the worker serves changes.
    conn.execute(
        "INSERT INTO workers (owner_id, serves, since) VALUES (?, ?, ?) "
        "ON CONFLICT (owner_id) DO UPDATE SET serves = excluded.serves, "
        "since = CASE WHEN serves = excluded.serves THEN since ELSE excluded.since END",
        (owner_id, serves_json(serves), to_micros(now)),
    )


def list_workers(conn: sqlite3.Connection) -> list[WorkerRow]:
    rows = conn.execute("SELECT owner_id, serves, since FROM workers").fetchall()
    return sorted(
        (WorkerRow(r[0], frozen_serves(orjson.loads(r[1])), from_micros(r[2])) for r in rows),
        key=lambda row: row.owner_id,
    )


def delete_worker(conn: sqlite3.Connection, owner_id: str) -> None:
    conn.execute("DELETE FROM workers WHERE owner_id = ?", (owner_id,))
