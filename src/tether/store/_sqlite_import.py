"""The SQL of importing an exported log on SQLite (``ImportStore.import_conversation``): the
records checked as they stream in and written in batches, in one commit."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable

from tether.errors import SessionExists
from tether.records import Record
from tether.store._common import record_micros
from tether.store._import import ImportCheck
from tether.store._sqlite_gates import index_gates
from tether.store._sqlite_log import (
    find_conversation,
    index_attachments,
    insert_conversation_row,
    insert_records,
)
from tether.store._types import Conversation, SessionKey

__all__ = ("import_conversation",)


def import_conversation(
    conn: sqlite3.Connection,
    conversation: Conversation,
    records: Iterable[Record],
    touched: list[str],
    tenant: str | None = None,
) -> bool:
    """Write the log ``records`` stream, each checked as it comes (:class:`ImportCheck`),
    in batches, in the caller's transaction (a record that fails rolls it all back),
    unless its id or key is taken: ``False`` if this very log is held already,
    ``SessionExists`` if another one is (the whole log is checked first, all the same)."""
    key = conversation.key
    conversation = dataclasses.replace(conversation, tenant=tenant)
    check = ImportCheck(conversation)
    held = conn.execute(
        "SELECT agent, instance, session, head, head_hash, tenant FROM conversations WHERE id = ?",
        (conversation.id,),
    ).fetchone()
    if held is not None or find_conversation(conn, key) is not None:
        for _ in check.batches(records):
            pass
        last = check.finish()
        if held is not None and (
            SessionKey(*held[:3]),
            held[3],
            bytes(held[4]).hex(),
            held[5],
        ) == (key, last.seq, last.hash, tenant):
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
