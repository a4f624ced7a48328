"""The outbound webhook outbox on PostgreSQL (``WebhookStore``): one row per delivery; a
claim takes the due rows ``FOR UPDATE SKIP LOCKED``, so workers never take the same one."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import orjson
from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether.store._common import check_limit, to_micros
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

Conn = AsyncConnection[TupleRow]

_COLUMNS: Final = (
    "id, url, event, events, agent, instance, session, submission_id, tenant, status, body, "
    "attempts, next_attempt_at, last_status, last_error, created_at, delivered_at"
)

_CLAIM: Final = f"""
WITH due AS (
    SELECT id, next_attempt_at AS due_at FROM webhook_deliveries
    WHERE status = 'pending' AND next_attempt_at <= %(now)s
    ORDER BY next_attempt_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE webhook_deliveries AS d SET attempts = d.attempts + 1, next_attempt_at = %(until)s
FROM due WHERE d.id = due.id
RETURNING {", ".join(f"d.{column.strip()}" for column in _COLUMNS.split(","))}, due.due_at
"""


def _sendable(*texts: str | None) -> bool:
    """Whether libpq can send these (no NUL): a text with one matches no stored row."""
    return not any(text is not None and "\x00" in text for text in texts)


def _row(row: TupleRow) -> WebhookDelivery:
    (id_, url, event, events, agent, instance, session, submission_id, tenant, status, body,
     attempts, next_at, last_status, last_error, created_at, delivered_at) = row  # fmt: skip
    return WebhookDelivery(
        id=id_,
        url=url,
        event=event,
        key=SessionKey(agent, instance, session),
        submission_id=submission_id,
        created_at=created_at,
        status=WebhookStatus(status),
        events=tuple(orjson.loads(events)),
        body=None if body is None else bytes(body),
        attempts=attempts,
        next_attempt_at=next_at,
        last_status=last_status,
        last_error=last_error,
        delivered_at=delivered_at,
        tenant=tenant,
    )


async def _get(conn: Conn, delivery_id: str) -> WebhookDelivery | None:
    if not _sendable(delivery_id):
        return None
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM webhook_deliveries WHERE id = %s", (delivery_id,)
    )
    row = await cursor.fetchone()
    return None if row is None else _row(row)


async def put_webhook_deliveries(conn: Conn, deliveries: list[WebhookDelivery]) -> None:
    for row in deliveries:
        to_micros(row.created_at)  # aware, as every time given to a store
    async with conn.cursor() as cursor:
        await cursor.executemany(
            f"INSERT INTO webhook_deliveries ({_COLUMNS}) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
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
                    row.next_attempt_at,
                    row.last_status,
                    row.last_error,
                    row.created_at,
                    row.delivered_at,
                )
                for row in deliveries
            ],
        )


async def release_webhook_delivery(
    conn: Conn, delivery_id: str, body: bytes | None, now: datetime
) -> bool:
    if not _sendable(delivery_id):
        return False
    if body is None:
        cursor = await conn.execute(
            "UPDATE webhook_deliveries SET status = 'closed' WHERE id = %s AND status = 'held'",
            (delivery_id,),
        )
    else:
        cursor = await conn.execute(
            "UPDATE webhook_deliveries SET status = 'pending', body = %s, next_attempt_at = %s "
            "WHERE id = %s AND status = 'held'",
            (body, now, delivery_id),
        )
    return cursor.rowcount == 1


async def claim_webhook_deliveries(
    conn: Conn, now: datetime, lease_until: datetime, limit: int
) -> list[WebhookDelivery]:
    check_limit(limit)
    to_micros(now)
    to_micros(lease_until)
    cursor = await conn.execute(_CLAIM, {"now": now, "until": lease_until, "limit": limit})
    rows = sorted(await cursor.fetchall(), key=lambda row: (row[-1], row[0]))  # as they were due
    return [_row(row[:-1]) for row in rows]


async def finish_webhook_attempt(
    conn: Conn,
    delivery_id: str,
    attempt: int,
    status: WebhookStatus,
    next_attempt_at: datetime | None,
    last_status: int | None,
    last_error: str | None,
    now: datetime,
) -> bool:
    if not _sendable(delivery_id, last_error):
        return False
    pending = status is WebhookStatus.PENDING
    cursor = await conn.execute(
        "UPDATE webhook_deliveries SET status = %s, next_attempt_at = %s, last_status = %s, "
        "last_error = %s, delivered_at = CASE WHEN %s THEN %s ELSE delivered_at END "
        "WHERE id = %s AND status = 'pending' AND attempts = %s",
        (
            status.value,
            next_attempt_at if pending else None,
            last_status,
            last_error,
            status is WebhookStatus.DELIVERED,
            now,
            delivery_id,
            attempt,
        ),
    )
    return cursor.rowcount == 1


async def list_webhook_deliveries(
    conn: Conn,
    status: WebhookStatus | None,
    tenant: str | None,
    submission_id: str | None,
    limit: int,
    after: str | None,
) -> list[WebhookDelivery]:
    check_limit(limit)
    if not _sendable(tenant, submission_id, after):
        return []
    where: list[str] = []
    params: list[Any] = []
    if after is not None:
        mark = await (
            await conn.execute(
                "SELECT created_at, id FROM webhook_deliveries WHERE id = %s", (after,)
            )
        ).fetchone()
        if mark is None:
            return []
        where.append("(created_at, id) > (%s, %s)")
        params.extend(mark)
    for column, value in (
        ("status", None if status is None else status.value),
        ("tenant", tenant),
        ("submission_id", submission_id),
    ):
        if value is not None:
            where.append(f"{column} = %s")
            params.append(value)
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    cursor = await conn.execute(
        f"SELECT {_COLUMNS} FROM webhook_deliveries {clause}ORDER BY created_at, id LIMIT %s",
        (*params, limit),
    )
    return [_row(row) for row in await cursor.fetchall()]


async def get_webhook_delivery(conn: Conn, delivery_id: str) -> WebhookDelivery | None:
    return await _get(conn, delivery_id)


async def resend_webhook_delivery(
    conn: Conn, delivery_id: str, now: datetime
) -> WebhookDelivery | None:
    if not _sendable(delivery_id):
        return None
    await conn.execute(
        "UPDATE webhook_deliveries SET status = 'pending', attempts = 0, next_attempt_at = %s "
        "WHERE id = %s AND status IN ('pending', 'delivered', 'failed')",
        (now, delivery_id),
    )
    return await _get(conn, delivery_id)


async def forget_webhook_deliveries(conn: Conn, key: SessionKey) -> int:
    if not _sendable(key.agent, key.instance, key.session):
        return 0
    cursor = await conn.execute(
        "DELETE FROM webhook_deliveries WHERE agent = %s AND instance = %s AND session = %s",
        (key.agent, key.instance, key.session),
    )
    return cursor.rowcount
