"""The SQL of the sessions index on SQLite (``SessionListStore.list_sessions``), as a plain
function over a connection; and the v10 migration's backfill of it.

The index is the conversation row itself: its head, its last activity and its size, moved
by the one ``UPDATE`` every append runs (``_sqlite_log.move_anchors``). Its three indexes
order by an activity floor, which trails the exact last activity by at most
``ACTIVITY_LAG`` and moves about once a second, so that most appends leave the index entries
alone. A page reads one range of one index in floor order, in chunks, and puts what it read
in exact order; it stops once no row left to read could come before its last one (a row's
activity is at most its floor plus the lag). The first page starts past the newest place
there is, so that it is the same statement as the next ones.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from tether._payloads import ConversationParent
from tether.records import Record
from tether.store._common import (
    ATTACHING_KINDS,
    check_limit,
    check_session_filter,
    decode_session_cursor,
    encode_session_cursor,
    from_micros,
    record_micros,
)
from tether.store._sessions import SessionRow
from tether.store._sqlite_kinds import kind_code, kind_name
from tether.store._sqlite_log import ACTIVITY_LAG, index_attachments
from tether.store._types import SessionKey

__all__ = ("NEWEST", "SESSION_COLUMNS", "backfill", "list_sessions", "session_row")

SESSION_COLUMNS: Final = (
    "id, agent, instance, session, created_at, parent, last_activity, head, bytes, tenant, metadata"
)
NEWEST: Final = 2**63 - 1
"""Past every last activity: where the first page starts (with an id before every id)."""


def session_row(row: Sequence[Any]) -> SessionRow:
    """A row of ``SESSION_COLUMNS`` as the store hands it out."""
    cid, agent, instance, session, created_at, parent, last_activity, head, size, tenant = row[:10]
    metadata = row[10]
    return SessionRow(
        conversation_id=cid,
        key=SessionKey(agent, instance, session),
        created_at=from_micros(created_at),
        last_activity_at=from_micros(last_activity),
        records=int(head),
        bytes=int(size),
        parent=None if parent is None else ConversationParent.model_validate_json(parent),
        cursor=encode_session_cursor(last_activity, cid),
        tenant=tenant,
        metadata={} if metadata is None else json.loads(metadata),
    )


def list_sessions(
    conn: sqlite3.Connection,
    agent: str | None,
    instance: str | None,
    limit: int,
    after: str | None,
    tenant: str | None = None,
    since: int | None = None,
) -> list[SessionRow]:
    """A page: the rows past ``after`` (older, or as old with a greater id), newest first,
    active at ``since`` (microseconds) or later if given.
    The filters given are plain equalities, as the index of exactly those columns leads;
    the place is a range of its next column, the floor (past ``after``, no row has a floor
    above its activity), read on in chunks until the page is certain."""
    check_limit(limit)
    check_session_filter(agent, instance)
    micros, past_id = decode_session_cursor(after) if after is not None else (NEWEST, "")
    terms: list[str] = []
    params: list[Any] = []
    for column, value in (("tenant", tenant), ("agent", agent), ("instance", instance)):
        if value is not None:
            terms.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        # The floor trails the activity by at most the lag: the range's other bound.
        terms.append("last_activity >= ? AND activity_floor >= ?")
        params += [since, since - ACTIVITY_LAG]
    terms.append("(last_activity < ? OR (last_activity = ? AND id > ?))")
    # The bound alone makes the index a range read (SQLite seeks on no term of the OR).
    terms.append("activity_floor <= ? AND (activity_floor < ? OR (activity_floor = ? AND id > ?))")
    statement = (
        f"SELECT {SESSION_COLUMNS}, activity_floor FROM conversations "
        f"WHERE {' AND '.join(terms)} ORDER BY activity_floor DESC, id LIMIT ?"
    )
    chunk = limit + _CHUNK_SLACK
    found: list[Sequence[Any]] = []
    floor, floor_id = micros, ""  # where the next chunk reads on from, in floor order
    while True:
        rows = conn.execute(
            statement, [*params, micros, micros, past_id, floor, floor, floor, floor_id, chunk]
        ).fetchall()
        found += rows
        found.sort(key=_exact_order)
        if len(rows) < chunk:
            break  # the range is read to its end
        floor, floor_id = rows[-1][-1], rows[-1][0]
        # A row not read yet has a floor at most ``floor``: activity at most floor + lag.
        if len(found) >= limit and found[limit - 1][6] > floor + ACTIVITY_LAG:
            break
    return [session_row(row[:-1]) for row in found[:limit]]


def _exact_order(row: Sequence[Any]) -> tuple[int, str]:
    return -row[6], row[0]  # last activity, newest first; then id


_CHUNK_SLACK: Final = 16
"""Rows read past a page's size per chunk: those whose floor trails their activity."""


# --- schedules ------------------------------------------------------------------------


# --- the v10 migration ----------------------------------------------------------------

_ATTACHING_CODES = tuple(kind_code(kind) for kind in sorted(ATTACHING_KINDS))


def backfill(conn: sqlite3.Connection) -> None:
    """Derive the sessions index of the logs written before it existed (the v10 migration):
    each conversation's last activity from its head record, and the attachments its records
    reference, through the code every append runs (the sizes are summed in SQL)."""
    heads = conn.execute(
        "SELECT c.number, r.body FROM conversations c "
        "JOIN records r ON r.conversation = c.number AND r.seq = c.head"
    ).fetchall()
    conn.executemany(
        "UPDATE conversations SET last_activity = ?1, activity_floor = ?1 WHERE number = ?2",
        [(record_micros(bytes(body)), number) for number, body in heads],
    )
    marks = ", ".join("?" * len(_ATTACHING_CODES))
    rows = conn.execute(
        "SELECT c.id, r.seq, r.kind, r.body FROM records r "
        "JOIN conversations c ON c.number = r.conversation "
        f"WHERE r.kind IN ({marks}) AND instr(r.body, ?) > 0 ORDER BY r.conversation, r.seq",
        (*_ATTACHING_CODES, b'"attachments":'),
    ).fetchall()
    for cid, group in itertools.groupby(rows, key=lambda row: str(row[0])):
        records = [
            Record(seq, kind_name(kind), bytes(body), "", "") for _, seq, kind, body in group
        ]
        index_attachments(conn, cid, records)
