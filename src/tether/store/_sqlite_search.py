"""Session metadata and search on SQLite, as plain functions over a connection: a merge
patch of a conversation's metadata, and a page of the sessions index narrowed by metadata
filters and the full text of messages.

A conversation's metadata is kept twice in the commit that changes it: whole, as the
canonical JSON of its row's ``metadata`` column (what a listing shows), and one row per key
in ``session_metadata`` (key, the value's text form, the conversation's number), whose
primary key serves a filter. A search page reads the conversations each filter names from
its index (``session_metadata``'s key, ``session_text``'s FTS5 index), intersected, then
those rows by number, puts them in the listing order and keeps those past the cursor.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from tether.errors import ConversationNotFound
from tether.store._common import check_limit, check_session_filter, decode_session_cursor
from tether.store._metadata import (
    MetadataValue,
    merge_metadata,
    metadata_json,
    metadata_text,
)
from tether.store._sessions import SessionRow
from tether.store._sqlite_sessions import NEWEST, SESSION_COLUMNS, session_row
from tether.store._sqlite_text import SEQ_BITS, match_expression

__all__ = ("forget_metadata", "patch_metadata", "search_sessions")


def patch_metadata(
    conn: sqlite3.Connection, conversation_id: str, patch: Mapping[str, Any]
) -> dict[str, MetadataValue]:
    """Apply ``patch`` to the conversation's metadata in the caller's transaction."""
    row = conn.execute(
        "SELECT number, metadata FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    number, stored = row
    current = {} if stored is None else _decode(stored)
    merged = merge_metadata(current, patch)
    if merged == current:
        return merged
    conn.execute(
        "UPDATE conversations SET metadata = ? WHERE number = ?",
        (metadata_json(merged) if merged else None, number),
    )
    forget_metadata(conn, number)
    conn.executemany(
        "INSERT INTO session_metadata (key, value, conversation) VALUES (?, ?, ?)",
        [(key, metadata_text(value), number) for key, value in merged.items()],
    )
    return merged


def _decode(stored: str) -> dict[str, MetadataValue]:
    decoded: dict[str, MetadataValue] = json.loads(stored)
    return decoded


def forget_metadata(conn: sqlite3.Connection, number: int) -> None:
    """Remove conversation ``number``'s metadata rows (its erase; a patch rewriting them)."""
    conn.execute("DELETE FROM session_metadata WHERE conversation = ?", (number,))


def search_sessions(
    conn: sqlite3.Connection,
    *,
    agent: str | None,
    instance: str | None,
    limit: int,
    after: str | None,
    tenant: str | None,
    metadata: Mapping[str, str],
    query: Sequence[str],
    since: int | None,
) -> list[SessionRow]:
    """A page of the sessions matching every metadata filter and every word of ``query``
    (at least one of them given), past ``after``, newest activity first."""
    check_limit(limit)
    check_session_filter(agent, instance)
    assert metadata or query
    micros, past_id = decode_session_cursor(after) if after is not None else (NEWEST, "")
    named: list[str] = []
    params: list[Any] = []
    for key, value in metadata.items():
        named.append("SELECT conversation FROM session_metadata WHERE key = ? AND value = ?")
        params += [key, value]
    if query:
        named.append(f"SELECT rowid >> {SEQ_BITS} FROM session_text WHERE session_text MATCH ?")
        params.append(match_expression(query))
    terms = [f"number IN ({' INTERSECT '.join(named)})"]
    for column, equal in (("tenant", tenant), ("agent", agent), ("instance", instance)):
        if equal is not None:
            terms.append(f"{column} = ?")
            params.append(equal)
    terms.append("(last_activity < ? OR (last_activity = ? AND id > ?))")
    params += [micros, micros, past_id]
    if since is not None:
        terms.append("last_activity >= ?")
        params.append(since)
    rows = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM conversations WHERE {' AND '.join(terms)} "
        "ORDER BY last_activity DESC, id LIMIT ?",
        [*params, limit],
    ).fetchall()
    return [session_row(row) for row in rows]
