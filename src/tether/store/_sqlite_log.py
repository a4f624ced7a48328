"""The SQL of a conversation's log (``LogStore``): conversations, their records and anchors,
forks and snapshots, as plain functions over a connection.

Write functions run on the writer's connection inside its transaction and append the ids of the
conversations they wrote to ``touched``; read functions run on any reader connection. Both
raise only Tether errors (the caller maps ``sqlite3.Error``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Final

from tether._canonical import canonical_json
from tether._gc import BULK, collector_paused
from tether._payloads import ConversationParent
from tether.errors import ConversationNotFound, SeqTruncated, SessionExists
from tether.records import Actor, Record, RecordDraft
from tether.store._common import (
    attachment_digests,
    check_fork_seq,
    fork_parent,
    from_micros,
    record_micros,
    record_time,
    seal_append,
    seal_created,
    to_micros,
)
from tether.store._sqlite_gates import index_gates
from tether.store._sqlite_kinds import kind_code, kind_name
from tether.store._sqlite_text import index_text
from tether.store._sqlite_usage import add_usage
from tether.store._types import Conversation, SessionKey

__all__ = (
    "ACTIVITY_LAG",
    "HEAD_STATE_COLUMNS",
    "RECORD_COLUMNS",
    "anchor",
    "append_checked",
    "chained",
    "ensure_conversation",
    "find_conversation",
    "fork",
    "get_conversation",
    "get_snapshot",
    "head",
    "index_attachments",
    "insert_conversation",
    "insert_conversation_row",
    "insert_records",
    "mint_fence",
    "move_anchor",
    "move_anchors",
    "moves_floor",
    "put_snapshot",
    "read",
)

RECORD_COLUMNS = "seq, kind, body, hash"
_CONVERSATION_COLUMNS = "id, agent, instance, session, created_at, parent, tenant"


def _conversation(row: tuple[Any, ...]) -> Conversation:
    cid, agent, instance, session, created_at, parent, tenant = row
    return Conversation(
        cid,
        SessionKey(agent, instance, session),
        from_micros(created_at),
        None if parent is None else ConversationParent.model_validate_json(parent),
        tenant,
    )


def get_conversation(conn: sqlite3.Connection, conversation_id: str) -> Conversation:
    row = conn.execute(
        f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return _conversation(row)


def find_conversation(conn: sqlite3.Connection, key: SessionKey) -> Conversation | None:
    row = conn.execute(
        f"SELECT {_CONVERSATION_COLUMNS} FROM conversations "
        "WHERE agent = ? AND instance = ? AND session = ?",
        (key.agent, key.instance, key.session),
    ).fetchone()
    return None if row is None else _conversation(row)


HEAD_STATE_COLUMNS = (
    "c.id, c.number, c.fence, c.session, c.head, c.head_hash, c.activity_floor, "
    "(SELECT body FROM records WHERE conversation = c.number AND seq = c.head), c.tenant"
)
"""What an append checks and seals against, from a conversation row ``c``: its anchor and
the head record's bytes (for its time), its activity floor (moved or not), and its tenant
(whose usage what it spends adds to)."""

_NUMBER = "(SELECT number FROM conversations WHERE id = ?)"
"""A conversation's number, by id: what a records row holds instead of the id."""


def insert_records(conn: sqlite3.Connection, number: int, records: Sequence[Record]) -> None:
    conn.executemany(
        "INSERT INTO records (conversation, seq, kind, body, hash) VALUES (?, ?, ?, ?, ?)",
        [(number, r.seq, kind_code(r.kind), r.canonical, bytes.fromhex(r.hash)) for r in records],
    )
    index_text(conn, number, records)


def index_attachments(
    conn: sqlite3.Connection, conversation_id: str, records: Sequence[Record]
) -> None:
    """Keep the attachments ``records`` (just written to ``conversation_id``'s log) reference,
    in the caller's transaction; a batch without any (nearly every one) runs no statement."""
    digests = attachment_digests(records)
    if digests:
        conn.executemany(
            "INSERT INTO attachment_refs (digest, conversation_id) VALUES (?, ?) "
            "ON CONFLICT DO NOTHING",
            [(digest, conversation_id) for digest in digests],
        )


def insert_conversation(
    conn: sqlite3.Connection,
    conversation: Conversation,
    records: Sequence[Record],
    touched: list[str],
) -> int:
    """Write ``conversation`` holding exactly ``records`` (sealed or checked already): its row
    with its anchor and sessions index columns (and the prevHash of a first record that is a
    truncated log's ``log_truncated``), its records, the attachments they reference. Its
    number."""
    last = records[-1]
    number = insert_conversation_row(
        conn,
        conversation,
        head=last,
        size=sum(len(record.canonical) for record in records),
        first_prev_hash=records[0].prev_hash,
    )
    insert_records(conn, number, records)
    index_attachments(conn, conversation.id, records)
    touched.append(conversation.id)
    return number


def insert_conversation_row(
    conn: sqlite3.Connection,
    conversation: Conversation,
    *,
    head: Record | None = None,
    size: int = 0,
    first_prev_hash: str = "",
) -> int:
    """Insert the row of ``conversation`` with the anchor and sessions index columns of a
    log whose last record is ``head`` (left at their defaults without one, for an import
    to set once its records are in); its number."""
    key = conversation.key
    parent = conversation.parent
    activity = 0 if head is None else record_micros(head.canonical)
    number: int = conn.execute(
        "INSERT INTO conversations (id, agent, instance, session, created_at, parent, head, "
        "head_hash, last_activity, activity_floor, bytes, first_prev_hash, tenant) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING number",
        (
            conversation.id,
            key.agent,
            key.instance,
            key.session,
            to_micros(conversation.created_at),
            None if parent is None else canonical_json(parent.to_json_object()),
            0 if head is None else head.seq,
            b"" if head is None else bytes.fromhex(head.hash),
            activity,
            activity,
            size,
            bytes.fromhex(first_prev_hash) or None,
            conversation.tenant,
        ),
    ).fetchone()[0]
    return number


def _create_conversation(
    conn: sqlite3.Connection,
    conversation: Conversation,
    touched: list[str],
    prefix: Sequence[Record] = (),
    by: Actor | None = None,
) -> None:
    first = seal_created(conversation, prefix, by)
    insert_conversation(conn, conversation, [*prefix, first], touched)


def ensure_conversation(
    conn: sqlite3.Connection,
    key: SessionKey,
    conversation_id: str,
    created_at: datetime,
    touched: list[str],
    parent: ConversationParent | None = None,
    tenant: str | None = None,
    by: Actor | None = None,
) -> tuple[Conversation, bool]:
    """The conversation of ``key``, created (its first record linking to ``parent``, if
    given; of ``tenant``; made by ``by``) unless it exists; an existing one is left as it
    is."""
    existing = find_conversation(conn, key)
    if existing is not None:
        return existing, False
    conversation = Conversation(conversation_id, key, created_at, parent, tenant)
    _create_conversation(conn, conversation, touched, by=by)
    return conversation, True


def mint_fence(conn: sqlite3.Connection, conversation_id: str) -> int:
    row = conn.execute(
        "UPDATE conversations SET fence = fence + 1 WHERE id = ? RETURNING fence",
        (conversation_id,),
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return int(row[0])


def head(conn: sqlite3.Connection, conversation_id: str) -> int:
    return anchor(conn, conversation_id)[0]


def anchor(conn: sqlite3.Connection, conversation_id: str) -> tuple[int, str]:
    """The head seq and hash the conversation row holds (moved by every append)."""
    row = conn.execute(
        "SELECT head, head_hash FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return int(row[0]), bytes(row[1]).hex()


def _bounds(conn: sqlite3.Connection, conversation_id: str) -> tuple[int, int]:
    """The seq of the first record the log holds (1, or its ``log_truncated`` record's once
    retention truncated it) and its head: one statement, one snapshot."""
    row = conn.execute(
        "SELECT (SELECT MIN(seq) FROM records WHERE conversation = number), head "
        "FROM conversations WHERE id = ?",
        (conversation_id,),
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return int(row[0]), int(row[1])


def move_anchors(
    conn: sqlite3.Connection,
    heads: Sequence[tuple[int, bytes, int, int, int]],
    *,
    floor: bool = True,
) -> None:
    """Set each ``(head, head_hash, last activity, bytes added, conversation number)``: the
    anchor and the sessions index columns, in the commit of the append, by one statement
    for up to :data:`_ANCHORS_PER_UPDATE` conversations (one step instead of one a row).
    ``floor``: move each one's activity floor to its last activity too (see
    :func:`moves_floor`), which rewrites its three entries in the sessions index."""
    head = _MOVE_ANCHORS_AND_FLOORS if floor else _MOVE_ANCHORS
    for start in range(0, len(heads), _ANCHORS_PER_UPDATE):
        chunk = heads[start : start + _ANCHORS_PER_UPDATE]
        conn.execute(
            head + ",".join(["(?,?,?,?,?)"] * len(chunk)) + _MOVE_ANCHORS_WHERE,
            [value for row in chunk for value in row],
        )


def move_anchor(
    conn: sqlite3.Connection, head: tuple[int, bytes, int, int, int], *, floor: bool = True
) -> None:
    """``move_anchors`` for one conversation (one ``execute``, no list to flatten)."""
    conn.execute(_MOVE_ANCHOR_AND_FLOOR if floor else _MOVE_ANCHOR, head)


ACTIVITY_LAG: Final = 1_000_000
"""Microseconds a conversation's activity floor (what the sessions index orders by) may trail
its exact last activity."""


def moves_floor(floor: int, last_activity: int) -> bool:
    """Whether an append that brings the last activity to ``last_activity`` moves the floor:
    it moves once the activity is more than ``ACTIVITY_LAG`` past it (or, were a time ever
    to go back, below it)."""
    return not floor <= last_activity <= floor + ACTIVITY_LAG


_ANCHORS_PER_UPDATE = 199  # 5 host parameters a row, below SQLite's 999
_MOVE_ANCHORS = (
    "UPDATE conversations SET head = v.column1, head_hash = v.column2, "
    "last_activity = v.column3, bytes = bytes + v.column4 FROM (VALUES "
)
_MOVE_ANCHORS_AND_FLOORS = (
    "UPDATE conversations SET head = v.column1, head_hash = v.column2, "
    "last_activity = v.column3, activity_floor = v.column3, bytes = bytes + v.column4 "
    "FROM (VALUES "
)
_MOVE_ANCHORS_WHERE = ") AS v WHERE number = v.column5"
# Only a statement that names a column rewrites the index entries on it (even to the same
# value): hence one statement that keeps the floor and one that moves it.
_MOVE_ANCHOR = (
    "UPDATE conversations SET head = ?1, head_hash = ?2, last_activity = ?3, "
    "bytes = bytes + ?4 WHERE number = ?5"
)
_MOVE_ANCHOR_AND_FLOOR = (
    "UPDATE conversations SET head = ?1, head_hash = ?2, last_activity = ?3, "
    "activity_floor = ?3, bytes = bytes + ?4 WHERE number = ?5"
)


def chained(rows: Iterable[tuple[Any, ...]], prev_hash: str = "") -> Iterator[Record]:
    """Stored rows, in seq order, as records: each one's ``prev_hash`` is the hash of the row
    before it (hashes are stored as raw bytes, carried as hex)."""
    for seq, kind, body, hash_ in rows:
        hash_hex = hash_.hex()
        yield Record(seq, kind_name(kind), body, prev_hash, hash_hex)
        prev_hash = hash_hex


def _first_prev_hash(conn: sqlite3.Connection, conversation_id: str) -> str:
    row = conn.execute(
        "SELECT first_prev_hash FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    return "" if row is None or row[0] is None else bytes(row[0]).hex()


def read(
    conn: sqlite3.Connection, conversation_id: str, after_seq: int, limit: int
) -> list[Record]:
    # From the record at after_seq itself: its hash is the first one's prev_hash.
    statement = (
        f"SELECT {RECORD_COLUMNS} FROM records WHERE conversation = {_NUMBER} AND seq >= ? "
        "ORDER BY seq LIMIT ?"
    )
    params = (conversation_id, after_seq, limit + 1)
    cursor = conn.execute(statement, params)
    # The collector is paused for what is there, not for what was asked: most reads are of
    # a few new records however large their page.
    rows = cursor.fetchmany(BULK)
    with collector_paused(len(rows)):
        if len(rows) == BULK:
            rows += cursor.fetchall()
        prev_hash = ""
        if rows and rows[0][0] > max(after_seq, 1):
            # A truncated log, read from before its log_truncated record: that record's
            # prevHash (the hash of a record removed) is the conversation row's. Both in one
            # snapshot, so that a truncation committed in between cannot mismatch them.
            if conn.in_transaction:  # the writer's: a fork, a truncation
                prev_hash = _first_prev_hash(conn, conversation_id)
            else:
                conn.execute("BEGIN")
                try:
                    rows = conn.execute(statement, params).fetchall()
                    prev_hash = _first_prev_hash(conn, conversation_id)
                finally:
                    conn.execute("COMMIT")
        if rows and rows[0][0] == after_seq:
            prev_hash = rows[0][3].hex()
            del rows[0]
        records = list(chained(rows[:limit], prev_hash))
    if not records:
        head(conn, conversation_id)  # raises ConversationNotFound for an unknown id
    return records


def fork(
    conn: sqlite3.Connection,
    conversation_id: str,
    at_seq: int,
    key: SessionKey,
    new_conversation_id: str,
    created_at: datetime,
    by: Actor | None,
    touched: list[str],
) -> Conversation:
    first, current_head = _bounds(conn, conversation_id)
    check_fork_seq(conversation_id, at_seq, current_head)
    if at_seq < first:  # retention removed it: the log starts at its log_truncated record
        raise SeqTruncated(conversation_id, at_seq, first)
    if find_conversation(conn, key) is not None:
        raise SessionExists(str(key))
    prefix = read(conn, conversation_id, 0, at_seq - first + 1)
    (tenant,) = conn.execute(
        "SELECT tenant FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    conversation = Conversation(
        new_conversation_id, key, created_at, fork_parent(conversation_id, at_seq), tenant
    )
    _create_conversation(conn, conversation, touched, prefix, by)
    # A snapshot of the shared records describes the child's first records as well.
    conn.execute(
        f"INSERT INTO snapshots (conversation, seq, body) SELECT {_NUMBER}, seq, body "
        f"FROM snapshots WHERE conversation = {_NUMBER} AND seq <= ?",
        (new_conversation_id, conversation_id, at_seq),
    )
    return conversation


def put_snapshot(conn: sqlite3.Connection, conversation_id: str, seq: int, body: bytes) -> None:
    # Not one at or before a truncated log's log_truncated record: it describes records
    # retention removed (its first seq is 1 until then).
    cursor = conn.execute(
        "INSERT INTO snapshots (conversation, seq, body) "
        "SELECT number, ?1, ?2 FROM conversations WHERE id = ?3 "
        "AND (SELECT MIN(seq) FROM records WHERE conversation = number) < max(2, ?1) "
        "ON CONFLICT (conversation) DO UPDATE SET seq = excluded.seq, body = excluded.body "
        "WHERE excluded.seq > snapshots.seq",
        (seq, body, conversation_id),
    )
    if cursor.rowcount == 0:
        # ConversationNotFound; or an older snapshot, or one of removed records: not kept
        head(conn, conversation_id)


def get_snapshot(conn: sqlite3.Connection, conversation_id: str) -> tuple[int, bytes] | None:
    row = conn.execute(
        f"SELECT seq, body FROM snapshots WHERE conversation = {_NUMBER}", (conversation_id,)
    ).fetchone()
    return None if row is None else (int(row[0]), bytes(row[1]))


def append_checked(
    conn: sqlite3.Connection,
    conversation_id: str,
    drafts: Sequence[RecordDraft],
    expected_seq: int,
    fence: int,
    touched: list[str],
    *,
    usage_holder: str | None = None,
) -> list[Record]:
    """An append inside a transaction that writes more than the records (``usage_holder``:
    whose reservations the model calls it completes give back, the conversation's if
    ``None``)."""
    row = conn.execute(
        f"SELECT {HEAD_STATE_COLUMNS} FROM conversations c WHERE c.id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    _, number, current_fence, session, current_head, head_hash, floor, head_body, tenant = row
    sealed = seal_append(
        drafts,
        conversation_id=conversation_id,
        expected_seq=expected_seq,
        fence=fence,
        current_fence=current_fence,
        session=session,
        head=current_head,
        head_hash=head_hash.hex(),
        head_time=record_time(head_body) if head_body else "",
    )
    insert_records(conn, number, sealed)
    last = sealed[-1]
    added = sum(len(record.canonical) for record in sealed)
    micros = record_micros(last.canonical)
    move_anchor(
        conn,
        (last.seq, bytes.fromhex(last.hash), micros, added, number),
        floor=moves_floor(floor, micros),
    )
    index_gates(conn, conversation_id, sealed)
    index_attachments(conn, conversation_id, sealed)
    if tenant is not None:
        add_usage(conn, tenant, usage_holder or conversation_id, sealed)
    touched.append(conversation_id)
    return sealed
