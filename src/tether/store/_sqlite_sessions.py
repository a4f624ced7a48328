"""The SQL of what a store keeps of a session besides its log (issue 22): the sessions index
(``list_sessions``), erasure, the import of an exported log, and durable schedules, as plain
functions over a connection; and the v10 migration's backfill.

The index is the conversation row itself: its head, its last activity and its size, moved
by the one ``UPDATE`` every append runs (``_sqlite_log.move_anchors``). Its three indexes
order by an activity floor, which trails the exact last activity by at most
``ACTIVITY_LAG`` and moves about once a second, so that most appends leave the index entries
alone. A page reads one range of one index in floor order, in chunks, and puts what it read
in exact order; it stops once no row left to read could come before its last one (a row's
activity is at most its floor plus the lag). The first page starts past the newest place
there is, so that it is the same statement as the next ones.
Write functions run on the writer's connection inside its transaction (or a savepoint of it):
an erase or an import is one commit.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson

from tether._canonical import canonical_json
from tether._payloads import ConversationParent
from tether.errors import ConversationNotFound, DispatchConflict, SessionExists
from tether.records import Record
from tether.store._common import (
    ATTACHING_KINDS,
    check_limit,
    check_session_filter,
    decode_session_cursor,
    encode_session_cursor,
    from_micros,
    record_micros,
    to_micros,
)
from tether.store._import import ImportCheck
from tether.store._sessions import ErasedSession, ScheduleRow, SessionRow
from tether.store._sqlite_gates import index_gates
from tether.store._sqlite_kinds import kind_code, kind_name
from tether.store._sqlite_log import (
    ACTIVITY_LAG,
    find_conversation,
    index_attachments,
    insert_conversation_row,
    insert_records,
)
from tether.store._types import Conversation, SessionKey

__all__ = (
    "backfill",
    "delete_schedule",
    "erase_session",
    "import_conversation",
    "list_schedules",
    "list_sessions",
    "put_schedule",
)

_SESSION_COLUMNS = "id, agent, instance, session, created_at, parent, last_activity, head, bytes"
_NEWEST: Final = 2**63 - 1
"""Past every last activity: where the first page starts (with an id before every id)."""


def _session(row: Sequence[Any]) -> SessionRow:
    cid, agent, instance, session, created_at, parent, last_activity, head, size = row
    return SessionRow(
        conversation_id=cid,
        key=SessionKey(agent, instance, session),
        created_at=from_micros(created_at),
        last_activity_at=from_micros(last_activity),
        records=int(head),
        bytes=int(size),
        parent=None if parent is None else ConversationParent.model_validate_json(parent),
        cursor=encode_session_cursor(last_activity, cid),
    )


def list_sessions(
    conn: sqlite3.Connection,
    agent: str | None,
    instance: str | None,
    limit: int,
    after: str | None,
) -> list[SessionRow]:
    """A page: the rows past ``after`` (older, or as old with a greater id), newest first.
    The filters given are plain equalities, as the index of exactly those columns leads;
    the place is a range of its next column, the floor (past ``after``, no row has a floor
    above its activity), read on in chunks until the page is certain."""
    check_limit(limit)
    check_session_filter(agent, instance)
    micros, past_id = decode_session_cursor(after) if after is not None else (_NEWEST, "")
    terms: list[str] = []
    params: list[Any] = []
    for column, value in (("agent", agent), ("instance", instance)):
        if value is not None:
            terms.append(f"{column} = ?")
            params.append(value)
    terms.append("(last_activity < ? OR (last_activity = ? AND id > ?))")
    # The bound alone makes the index a range read (SQLite seeks on no term of the OR).
    terms.append("activity_floor <= ? AND (activity_floor < ? OR (activity_floor = ? AND id > ?))")
    statement = (
        f"SELECT {_SESSION_COLUMNS}, activity_floor FROM conversations "
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
    return [_session(row[:-1]) for row in found[:limit]]


def _exact_order(row: Sequence[Any]) -> tuple[int, str]:
    return -row[6], row[0]  # last activity, newest first; then id


_CHUNK_SLACK: Final = 16
"""Rows read past a page's size per chunk: those whose floor trails their activity."""


def erase_session(
    conn: sqlite3.Connection, conversation_id: str, touched: list[str]
) -> ErasedSession:
    """Everything of the conversation, in the caller's transaction: its submissions and their
    attempts, its records, snapshot and gates, its references to attachments, and each
    attachment no other conversation references any more; then its row."""
    row = conn.execute(
        "SELECT number, agent, instance, session FROM conversations WHERE id = ?",
        (conversation_id,),
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    number, agent, instance, session = row
    conn.execute(
        "DELETE FROM attempts WHERE submission_id IN "
        "(SELECT id FROM submissions WHERE conversation_id = ?)",
        (conversation_id,),
    )
    submissions = conn.execute(
        "DELETE FROM submissions WHERE conversation_id = ?", (conversation_id,)
    ).rowcount
    # What it held: fewer than its head once retention truncated it.
    records = conn.execute("DELETE FROM records WHERE conversation = ?", (number,)).rowcount
    snapshot = conn.execute("DELETE FROM snapshots WHERE conversation = ?", (number,)).rowcount
    conn.execute("DELETE FROM gates WHERE conversation_id = ?", (conversation_id,))
    digests = sorted(
        digest
        for (digest,) in conn.execute(
            "DELETE FROM attachment_refs WHERE conversation_id = ? RETURNING digest",
            (conversation_id,),
        ).fetchall()
    )
    removed = [
        digest
        for digest in digests
        if conn.execute(
            "DELETE FROM attachments WHERE digest = ?1 AND NOT EXISTS "
            "(SELECT 1 FROM attachment_refs WHERE digest = ?1) RETURNING digest",
            (digest,),
        ).fetchone()
        is not None
    ]
    conn.execute("DELETE FROM conversations WHERE number = ?", (number,))
    touched.append(conversation_id)  # a tailer finds it gone
    return ErasedSession(
        conversation_id=conversation_id,
        key=SessionKey(agent, instance, session),
        records=records,
        submissions=submissions,
        snapshot=snapshot > 0,
        attachments=tuple(removed),
    )


def import_conversation(
    conn: sqlite3.Connection,
    conversation: Conversation,
    records: Iterable[Record],
    touched: list[str],
) -> bool:
    """Write the log ``records`` stream, each checked as it comes (:class:`ImportCheck`),
    in batches, in the caller's transaction (a record that fails rolls it all back),
    unless its id or key is taken: ``False`` if this very log is held already,
    ``SessionExists`` if another one is (the whole log is checked first, all the same)."""
    key = conversation.key
    check = ImportCheck(conversation)
    held = conn.execute(
        "SELECT agent, instance, session, head, head_hash FROM conversations WHERE id = ?",
        (conversation.id,),
    ).fetchone()
    if held is not None or find_conversation(conn, key) is not None:
        for _ in check.batches(records):
            pass
        last = check.finish()
        if held is not None and (SessionKey(*held[:3]), held[3], bytes(held[4]).hex()) == (
            key,
            last.seq,
            last.hash,
        ):
            return False
        raise SessionExists(str(key))
    number = insert_conversation_row(conn, conversation)
    for batch in check.batches(records):
        insert_records(conn, number, batch)
        index_attachments(conn, conversation.id, batch)
        # Its own records' gates (a fork's copied ones are its parent's): the records may
        # start at a truncated log's log_truncated record, not at seq 1.
        index_gates(conn, conversation.id, [r for r in batch if r.seq >= check.start])
    last, first = check.finish(), check.first
    assert first is not None  # finish() found records
    conn.execute(
        "UPDATE conversations SET head = ?, head_hash = ?, last_activity = ?, "
        "activity_floor = ?, bytes = ?, first_prev_hash = ? WHERE number = ?",
        (
            last.seq,
            bytes.fromhex(last.hash),
            record_micros(last.canonical),
            record_micros(last.canonical),
            check.bytes,
            bytes.fromhex(first.prev_hash) or None,  # a truncated log's log_truncated
            number,
        ),
    )
    touched.append(conversation.id)
    return True


# --- schedules ------------------------------------------------------------------------


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
