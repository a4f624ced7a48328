"""The sessions index on PostgreSQL (``SessionListStore.list_sessions``), and the v7
backfill.

**The index.** A conversation's row keeps its last activity (``last_activity_at``, its last
record's time), its head (``records``) and the canonical bytes of its records (``bytes``),
moved by the one update of the row that every append already makes (``_log``): no append
pays a statement more. Each filter (none, the agent, the agent and instance) has an index in
the listing order, newest activity first, then the conversation id bytewise; a page past a
cursor starts where the index's bound says, and only the rows as old as the cursor's are
filtered by id.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Final

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether._payloads import ConversationParent
from tether.records import Record
from tether.store._common import (
    attachment_digests,
    check_limit,
    check_session_filter,
    decode_session_cursor,
    encode_session_cursor,
    from_micros,
    record_time,
    to_micros,
)
from tether.store._sessions import SessionRow
from tether.store._types import SessionKey
from tether.store.postgres._refs import INSERT_REFS

__all__ = ("ORDER", "PAST", "SESSION_COLUMNS", "backfill", "list_sessions", "session_row")

Conn = AsyncConnection[TupleRow]


SESSION_COLUMNS: Final = (
    "id, agent, instance, session, created_at, parent, last_activity_at, head, bytes, tenant, "
    "metadata"
)
ORDER: Final = 'last_activity_at DESC, id COLLATE "C"'
"""The listing order, spelled as its indexes are."""
PAST: Final = 'last_activity_at <= %s AND (last_activity_at < %s OR id COLLATE "C" > %s)'
"""The rows past a cursor: the first term bounds the index scan, the second filters out only
the rows as old as the cursor's."""


def session_row(row: TupleRow) -> SessionRow:
    """A row of ``SESSION_COLUMNS`` as the store hands it out."""
    cid, agent, instance, session, created_at, parent, last_activity_at, head, size, tenant = row[
        :10
    ]
    metadata = row[10]
    return SessionRow(
        conversation_id=cid,
        key=SessionKey(agent, instance, session),
        created_at=created_at,
        last_activity_at=last_activity_at,
        records=int(head),
        bytes=int(size),
        parent=None if parent is None else ConversationParent.model_validate_json(bytes(parent)),
        cursor=encode_session_cursor(to_micros(last_activity_at), cid),
        tenant=tenant,
        metadata={} if metadata is None else json.loads(metadata),
    )


async def list_sessions(
    conn: Conn,
    agent: str | None,
    instance: str | None,
    limit: int,
    after: str | None,
    tenant: str | None = None,
    since: datetime | None = None,
) -> list[SessionRow]:
    check_limit(limit)
    check_session_filter(agent, instance)
    start = decode_session_cursor(after) if after is not None else None
    if any(value is not None and "\x00" in value for value in (agent, instance, tenant)):
        return []  # no text column holds a NUL: nothing matches (and libpq cannot send it)
    terms: list[str] = []
    params: list[object] = []
    for column, value in (("tenant", tenant), ("agent", agent), ("instance", instance)):
        if value is not None:
            terms.append(f"{column} = %s")
            params.append(value)
    if start is not None:
        moment = from_micros(start[0])
        terms.append(PAST)
        params += [moment, moment, start[1]]
    if since is not None:
        terms.append("last_activity_at >= %s")
        params.append(since)
    where = f"WHERE {' AND '.join(terms)} " if terms else ""
    rows = await (
        await conn.execute(
            f"SELECT {SESSION_COLUMNS} FROM conversations {where}ORDER BY {ORDER} LIMIT %s",
            [*params, limit],
        )
    ).fetchall()
    return [session_row(row) for row in rows]


# --- the v7 backfill ------------------------------------------------------------------


async def backfill(conn: Conn) -> None:
    """Derive what v7 keeps from the logs already stored: each conversation's bytes, last
    activity (its head record's time) and the attachments its records reference.
    Idempotent: it computes the same values again from the same logs."""
    await conn.execute(
        "UPDATE conversations c SET bytes = s.total FROM ("
        "SELECT conversation_id, sum(length(body))::bigint AS total FROM records "
        "GROUP BY conversation_id) s WHERE c.id = s.conversation_id"
    )
    ids: list[str] = []
    times: list[datetime] = []
    async with conn.cursor(name="tether_sessions_backfill") as cursor:
        await cursor.execute(
            "SELECT c.id, r.body FROM conversations c "
            "JOIN records r ON r.conversation_id = c.id AND r.seq = c.head"
        )
        async for cid, body in cursor:
            ids.append(cid)
            times.append(datetime.fromisoformat(record_time(bytes(body))))
    await conn.execute(
        "UPDATE conversations c SET last_activity_at = u.at "
        "FROM unnest(%s::text[], %s::timestamptz[]) AS u(id, at) WHERE c.id = u.id",
        (ids, times),
    )
    references: dict[str, list[Record]] = {}
    async with conn.cursor(name="tether_refs_backfill") as cursor:
        await cursor.execute(
            "SELECT conversation_id, seq, kind, body FROM records "
            "WHERE kind IN ('user_message', 'steer_received') "
            "AND position('\"attachments\":'::bytea IN body) > 0"
        )
        async for cid, seq, kind, body in cursor:
            references.setdefault(cid, []).append(Record(int(seq), kind, bytes(body), "", ""))
    for cid, carrying in references.items():
        digests = attachment_digests(carrying)
        if digests:
            await conn.execute(INSERT_REFS.format(where=""), {"cid": cid, "digests": digests})
