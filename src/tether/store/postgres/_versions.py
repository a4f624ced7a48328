"""The SQL of agent versions (``VersionStore``) on PostgreSQL: a submission's version moved
by CAS in one statement, the unsettled submissions counted by version, and the workers
table."""

from __future__ import annotations

from datetime import datetime

import orjson

from tether.errors import VersionConflict
from tether.store._common import SUBMISSION_COLUMNS
from tether.store._types import Submission
from tether.store._versions import (
    VersionCount,
    VersionsServed,
    WorkerRow,
    count_order,
    frozen_serves,
    serves_json,
)
from tether.store.postgres._log import Conn
from tether.store.postgres._submissions import get_submission, submission

__all__ = ("delete_worker", "list_workers", "put_worker", "set_version", "version_counts")


async def set_version(
    conn: Conn, submission_id: str, expected: str | None, version: str
) -> Submission:
    row = await (
        await conn.execute(
            "UPDATE submissions SET version = %s WHERE id = %s "
            "AND status IN ('queued', 'waiting') AND version IS NOT DISTINCT FROM %s "
            f"RETURNING {SUBMISSION_COLUMNS}",
            (version, submission_id, expected),
        )
    ).fetchone()
    if row is not None:
        return submission(row)
    current = await get_submission(conn, submission_id)  # SubmissionNotFound
    raise VersionConflict(
        submission_id, expected=expected, actual=current.version, status=current.status.value
    )


async def version_counts(conn: Conn, agent: str | None) -> list[VersionCount]:
    rows = await (
        await conn.execute(
            "SELECT agent, version, status, wait_reason, COUNT(*) FROM submissions "
            "WHERE status IN ('scheduled', 'queued', 'running', 'waiting') "
            "AND (%(agent)s::text IS NULL OR agent = %(agent)s) "
            "GROUP BY agent, version, status, wait_reason",
            {"agent": agent},
        )
    ).fetchall()
    return sorted((VersionCount(*row) for row in rows), key=count_order)


async def put_worker(conn: Conn, owner_id: str, serves: VersionsServed, now: datetime) -> None:
    # ``since`` moves only when what the worker serves changes.
    await conn.execute(
        "INSERT INTO workers (owner_id, serves, since) VALUES (%s, %s, %s) "
        "ON CONFLICT (owner_id) DO UPDATE SET serves = excluded.serves, "
        "since = CASE WHEN workers.serves = excluded.serves THEN workers.since "
        "ELSE excluded.since END",
        (owner_id, serves_json(serves), now),
    )


async def list_workers(conn: Conn) -> list[WorkerRow]:
    rows = await (await conn.execute("SELECT owner_id, serves, since FROM workers")).fetchall()
    return sorted(
        (WorkerRow(r[0], frozen_serves(orjson.loads(r[1])), r[2]) for r in rows),
        key=lambda row: row.owner_id,
    )


async def delete_worker(conn: Conn, owner_id: str) -> None:
    await conn.execute("DELETE FROM workers WHERE owner_id = %s", (owner_id,))
