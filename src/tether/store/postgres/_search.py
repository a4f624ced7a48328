"""Session metadata and search on PostgreSQL: a merge patch of a conversation's metadata,
and a page of the sessions index narrowed by metadata filters and the full text of messages.

A conversation's metadata is kept twice in the transaction that changes it: whole, as the
canonical JSON of its row's ``metadata`` column (what a listing shows), and one row per key
in ``session_metadata`` (key, the value's text form, the conversation), whose primary key
serves a filter. A search page reads the conversations each filter names from its index
(``session_metadata``'s key, ``session_text``'s GIN index), intersected, then those rows by
id, puts them in the listing order and keeps those past the cursor.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether.errors import ConversationNotFound
from tether.store._common import (
    check_limit,
    check_session_filter,
    decode_session_cursor,
    from_micros,
)
from tether.store._metadata import MetadataValue, merge_metadata, metadata_json, metadata_text
from tether.store._sessions import SessionRow
from tether.store.postgres._sessions import ORDER, PAST, SESSION_COLUMNS, session_row
from tether.store.postgres._text import tsquery

__all__ = ("patch_metadata", "search_sessions")

Conn = AsyncConnection[TupleRow]


async def patch_metadata(
    conn: Conn, conversation_id: str, patch: Mapping[str, object]
) -> dict[str, MetadataValue]:
    """Apply ``patch`` to the conversation's metadata in the caller's transaction (the row
    locked: concurrent patches apply one after the other)."""
    row = await (
        await conn.execute(
            "SELECT metadata FROM conversations WHERE id = %s FOR UPDATE", (conversation_id,)
        )
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    current: dict[str, MetadataValue] = {} if row[0] is None else json.loads(row[0])
    merged = merge_metadata(current, patch)
    if merged == current:
        return merged
    await conn.execute(
        "UPDATE conversations SET metadata = %s WHERE id = %s",
        (metadata_json(merged) if merged else None, conversation_id),
    )
    await conn.execute(
        "DELETE FROM session_metadata WHERE conversation_id = %s", (conversation_id,)
    )
    if merged:
        await conn.execute(
            "INSERT INTO session_metadata (key, value, conversation_id) "
            "SELECT k, v, %s FROM unnest(%s::text[], %s::text[]) AS m(k, v)",
            (
                conversation_id,
                list(merged),
                [metadata_text(value) for value in merged.values()],
            ),
        )
    return merged


async def search_sessions(
    conn: Conn,
    agent: str | None,
    instance: str | None,
    limit: int,
    after: str | None,
    tenant: str | None,
    metadata: Mapping[str, str],
    query: Sequence[str],
    since: datetime | None,
) -> list[SessionRow]:
    """A page of the sessions matching every metadata filter and every word of ``query``
    (at least one of them given), past ``after``, newest activity first."""
    check_limit(limit)
    check_session_filter(agent, instance)
    assert metadata or query
    start = decode_session_cursor(after) if after is not None else None
    if any(value is not None and "\x00" in value for value in (agent, instance, tenant)):
        return []  # no text column holds a NUL: nothing matches (and libpq cannot send it)
    named: list[str] = []
    params: list[object] = []
    for key, value in metadata.items():
        named.append("SELECT conversation_id FROM session_metadata WHERE key = %s AND value = %s")
        params += [key, value]
    if query:
        named.append("SELECT conversation_id FROM session_text WHERE document @@ %s::tsquery")
        params.append(tsquery(query))
    terms = [f"id IN ({' INTERSECT '.join(named)})"]
    for column, equal in (("tenant", tenant), ("agent", agent), ("instance", instance)):
        if equal is not None:
            terms.append(f"{column} = %s")
            params.append(equal)
    if start is not None:
        moment = from_micros(start[0])
        terms.append(PAST)
        params += [moment, moment, start[1]]
    if since is not None:
        terms.append("last_activity_at >= %s")
        params.append(since)
    rows = await (
        await conn.execute(
            f"SELECT {SESSION_COLUMNS} FROM conversations WHERE {' AND '.join(terms)} "
            f"ORDER BY {ORDER} LIMIT %s",
            [*params, limit],
        )
    ).fetchall()
    return [session_row(row) for row in rows]
