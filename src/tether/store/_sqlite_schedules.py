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


def _schedule(sid: str, definition: bytes, created_at: int) -> ScheduleRow:
    return ScheduleRow(sid, orjson.loads(definition), from_micros(created_at))


def put_schedule(conn: sqlite3.Connection, schedule: ScheduleRow) -> ScheduleRow:
    payload = canonical_json(schedule.definition)
    conn.execute(
        "INSERT INTO schedules (id, definition, created_at) VALUES (?, ?, ?) "
        "ON CONFLICT (id) DO NOTHING",
        (schedule.id, payload, to_micros(schedule.created_at)),
    )
    definition, created_at = conn.execute(
        "SELECT definition, created_at FROM schedules WHERE id = ?", (schedule.id,)
    ).fetchone()
    if bytes(definition) != payload:
        raise DispatchConflict(schedule.id, "the schedules")
    return _schedule(schedule.id, definition, created_at)


def list_schedules(conn: sqlite3.Connection) -> list[ScheduleRow]:
    rows = conn.execute(
        "SELECT id, definition, created_at FROM schedules ORDER BY created_at, id"
    ).fetchall()
    return [_schedule(*row) for row in rows]


def delete_schedule(conn: sqlite3.Connection, schedule_id: str) -> bool:
    return conn.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,)).rowcount > 0
