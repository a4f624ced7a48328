"""Durable schedules on PostgreSQL: one row per schedule id, its definition as canonical JSON
(compared bytewise, so an equal definition is the same bytes), oldest first."""

from __future__ import annotations

from typing import Final

import orjson
from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether._canonical import canonical_json
from tether.errors import DispatchConflict
from tether.store._common import to_micros
from tether.store._sessions import ScheduleRow

__all__ = ("delete_schedule", "list_schedules", "put_schedule")

Conn = AsyncConnection[TupleRow]

_PUT: Final = """
WITH put AS (
    INSERT INTO schedules (id, definition, created_at, tenant)
    VALUES (%(id)s, %(definition)s, %(at)s, %(tenant)s)
    ON CONFLICT (id) DO NOTHING
    RETURNING id, definition, created_at, tenant
)
SELECT id, definition, created_at, tenant FROM put
UNION ALL
SELECT id, definition, created_at, tenant FROM schedules
WHERE id = %(id)s AND NOT EXISTS (SELECT 1 FROM put)
"""
"""The schedule put, or the one kept under its id (one statement, its own transaction)."""


def _row(row: TupleRow) -> ScheduleRow:
    schedule_id, definition, created_at, tenant = row
    return ScheduleRow(schedule_id, orjson.loads(bytes(definition)), created_at, tenant)


async def put_schedule(conn: Conn, schedule: ScheduleRow) -> ScheduleRow:
    definition = canonical_json(dict(schedule.definition))
    to_micros(schedule.created_at)  # aware, as every time given to a store
    params = {
        "id": schedule.id,
        "definition": definition,
        "at": schedule.created_at,
        "tenant": schedule.tenant,
    }
    while True:
        row = await (await conn.execute(_PUT, params)).fetchone()
        # None: a schedule of that id was put or deleted while this statement ran (the
        # conflict is seen, not the row): again, in a snapshot that has it.
        if row is not None:
            break
    if bytes(row[1]) != definition or row[3] != schedule.tenant:
        raise DispatchConflict(schedule.id, "the schedules")
    return _row(row)


async def list_schedules(conn: Conn, tenant: str | None = None) -> list[ScheduleRow]:
    """Every schedule, or a tenant's (read through ``schedules_by_tenant``), oldest first."""
    if tenant is not None and "\x00" in tenant:
        return []  # no text column holds a NUL: nothing matches (and libpq cannot send it)
    where, params = ("WHERE tenant = %s ", (tenant,)) if tenant is not None else ("", ())
    rows = await (
        await conn.execute(
            "SELECT id, definition, created_at, tenant FROM schedules "
            f"{where}ORDER BY created_at, id",
            params,
        )
    ).fetchall()
    return [_row(row) for row in rows]


async def delete_schedule(conn: Conn, schedule_id: str) -> bool:
    cursor = await conn.execute("DELETE FROM schedules WHERE id = %s", (schedule_id,))
    return cursor.rowcount == 1
