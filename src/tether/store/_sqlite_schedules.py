"""The SQL of durable schedules on SQLite (``ScheduleStore``): one row per schedule id, its
definition as canonical JSON (compared bytewise), oldest first."""

from __future__ import annotations

import sqlite3

import orjson

from tether._canonical import canonical_json
from tether.errors import DispatchConflict
from tether.store._common import from_micros, to_micros
from tether.store._sessions import ScheduleRow

__all__ = ("delete_schedule", "list_schedules", "put_schedule")


def _schedule(sid: str, definition: bytes, created_at: int, tenant: str | None) -> ScheduleRow:
    return ScheduleRow(sid, orjson.loads(definition), from_micros(created_at), tenant)


def put_schedule(conn: sqlite3.Connection, schedule: ScheduleRow) -> ScheduleRow:
    payload = canonical_json(schedule.definition)
    conn.execute(
        "INSERT INTO schedules (id, definition, created_at, tenant) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (id) DO NOTHING",
        (schedule.id, payload, to_micros(schedule.created_at), schedule.tenant),
    )
    definition, created_at, tenant = conn.execute(
        "SELECT definition, created_at, tenant FROM schedules WHERE id = ?", (schedule.id,)
    ).fetchone()
    if bytes(definition) != payload or tenant != schedule.tenant:
        raise DispatchConflict(schedule.id, "the schedules")
    return _schedule(schedule.id, definition, created_at, tenant)


def list_schedules(conn: sqlite3.Connection, tenant: str | None = None) -> list[ScheduleRow]:
    """Every schedule, or a tenant's (read through ``schedules_by_tenant``), oldest first."""
    where, params = ("WHERE tenant = ? ", (tenant,)) if tenant is not None else ("", ())
    rows = conn.execute(
        f"SELECT id, definition, created_at, tenant FROM schedules {where}ORDER BY created_at, id",
        params,
    ).fetchall()
    return [_schedule(*row) for row in rows]


def delete_schedule(conn: sqlite3.Connection, schedule_id: str) -> bool:
    return conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,)).rowcount > 0
