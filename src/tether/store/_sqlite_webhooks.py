"""The SQL of the outbound webhook outbox on SQLite (``WebhookStore``): one row per delivery,
times in microseconds; the due deliveries read through ``webhook_deliveries_due``."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any, Final

import orjson

from tether.store._common import check_limit, from_micros, to_micros
from tether.store._types import SessionKey
from tether.store._webhooks import WebhookDelivery, WebhookStatus

__all__ = (
    "claim_webhook_deliveries",
    "finish_webhook_attempt",
    "forget_webhook_deliveries",
    "get_webhook_delivery",
    "list_webhook_deliveries",
    "put_webhook_deliveries",
    "release_webhook_delivery",
    "resend_webhook_delivery",
)

_COLUMNS: Final = (
    "id, url, event, events, agent, instance, session, submission_id, tenant, status, body, "
    "attempts, next_attempt_at, last_status, last_error, created_at, delivered_at"
)


def _micros(moment: datetime | None) -> int | None:
    return None if moment is None else to_micros(moment)


def _time(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def _row(row: tuple[Any, ...]) -> WebhookDelivery:
    (id_, url, event, events, agent, instance, session, submission_id, tenant, status, body,
     attempts, next_at, last_status, last_error, created_at, delivered_at) = row  # fmt: skip
    return WebhookDelivery(
        id=id_,
        url=url,
        event=event,
        key=SessionKey(agent, instance, session),
        submission_id=submission_id,
        created_at=from_micros(created_at),
        status=WebhookStatus(status),
        events=tuple(orjson.loads(events)),
        body=None if body is None else bytes(body),
        attempts=attempts,
        next_attempt_at=_time(next_at),
        last_status=last_status,
        last_error=last_error,
        delivered_at=_time(delivered_at),
        tenant=tenant,
    )


def _get(conn: sqlite3.Connection, delivery_id: str) -> WebhookDelivery | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM webhook_deliveries WHERE id = ?", (delivery_id,)
    ).fetchone()
    return None if row is None else _row(row)


def put_webhook_deliveries(conn: sqlite3.Connection, deliveries: list[WebhookDelivery]) -> None:
    conn.executemany(
        f"INSERT INTO webhook_deliveries ({_COLUMNS}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        [
            (
                row.id,
                row.url,
                row.event,
                orjson.dumps(list(row.events)).decode(),
                row.key.agent,
                row.key.instance,
                row.key.session,
                row.submission_id,
                row.tenant,
                row.status.value,
                row.body,
                row.attempts,
                _micros(row.next_attempt_at),
                row.last_status,
                row.last_error,
                to_micros(row.created_at),
                _micros(row.delivered_at),
            )
            for row in deliveries
        ],
    )


def release_webhook_delivery(
    conn: sqlite3.Connection, delivery_id: str, body: bytes | None, now: datetime
) -> bool:
    if body is None:
        cursor = conn.execute(
            "UPDATE webhook_deliveries SET status = 'closed' WHERE id = ? AND status = 'held'",
            (delivery_id,),
        )
    else:
        cursor = conn.execute(
            "UPDATE webhook_deliveries SET status = 'pending', body = ?, next_attempt_at = ? "
            "WHERE id = ? AND status = 'held'",
            (body, to_micros(now), delivery_id),
        )
    return cursor.rowcount == 1


def claim_webhook_deliveries(
    conn: sqlite3.Connection, now: datetime, lease_until: datetime, limit: int
) -> list[WebhookDelivery]:
    check_limit(limit)
    ids = [
        row[0]
        for row in conn.execute(
            "SELECT id FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? "
            "ORDER BY next_attempt_at, id LIMIT ?",
            (to_micros(now), limit),
        ).fetchall()
    ]
    claimed = []
    for delivery_id in ids:
        conn.execute(
            "UPDATE webhook_deliveries SET attempts = attempts + 1, next_attempt_at = ? "
            "WHERE id = ?",
            (to_micros(lease_until), delivery_id),
        )
        row = _get(conn, delivery_id)
        assert row is not None  # read in this transaction
        claimed.append(row)
    return claimed


def finish_webhook_attempt(
    conn: sqlite3.Connection,
    delivery_id: str,
    attempt: int,
    status: WebhookStatus,
    next_attempt_at: datetime | None,
    last_status: int | None,
    last_error: str | None,
    now: datetime,
) -> bool:
    pending = status is WebhookStatus.PENDING
    cursor = conn.execute(
        "UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, last_status = ?, "
        "last_error = ?, delivered_at = CASE WHEN ? THEN ? ELSE delivered_at END "
        "WHERE id = ? AND status = 'pending' AND attempts = ?",
        (
            status.value,
            _micros(next_attempt_at) if pending else None,
            last_status,
            last_error,
            status is WebhookStatus.DELIVERED,
            to_micros(now),
            delivery_id,
            attempt,
        ),
    )
    return cursor.rowcount == 1


def list_webhook_deliveries(
    conn: sqlite3.Connection,
    status: WebhookStatus | None,
    tenant: str | None,
    submission_id: str | None,
    limit: int,
    after: str | None,
) -> list[WebhookDelivery]:
    check_limit(limit)
    where: list[str] = []
    params: list[Any] = []
    if after is not None:
        mark = conn.execute(
            "SELECT created_at, id FROM webhook_deliveries WHERE id = ?", (after,)
        ).fetchone()
        if mark is None:
            return []
        where.append("(created_at, id) > (?, ?)")
        params.extend(mark)
    for column, value in (
        ("status", None if status is None else status.value),
        ("tenant", tenant),
        ("submission_id", submission_id),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM webhook_deliveries {clause}ORDER BY created_at, id LIMIT ?",
        (*params, limit),
    ).fetchall()
    return [_row(row) for row in rows]


def get_webhook_delivery(conn: sqlite3.Connection, delivery_id: str) -> WebhookDelivery | None:
    return _get(conn, delivery_id)


def resend_webhook_delivery(
    conn: sqlite3.Connection, delivery_id: str, now: datetime
) -> WebhookDelivery | None:
    conn.execute(
        "UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = ? "
        "WHERE id = ? AND status IN ('pending', 'delivered', 'failed')",
        (to_micros(now), delivery_id),
    )
    return _get(conn, delivery_id)


def forget_webhook_deliveries(conn: sqlite3.Connection, key: SessionKey) -> int:
    cursor = conn.execute(
        "DELETE FROM webhook_deliveries WHERE agent = ? AND instance = ? AND session = ?",
        (key.agent, key.instance, key.session),
    )
    return cursor.rowcount
