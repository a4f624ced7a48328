"""The SQL of retention's truncation of a log's head (``RetentionStore.truncate_log``).

One write on the writer's connection, inside its transaction: the records up to the anchor's seq
go, the anchor takes the last one's place (its seq, kind code, bytes and hash in the records
row; its prevHash, the hash of a record now gone, on the conversation row, where ``read``
finds it), a snapshot of the removed records goes, and the conversation row's size moves.
Its head, head hash and last activity stay (the anchor keeps the removed record's hash and
time), and so do the gates, the attachments it references (``attachment_refs``: the
anchor's transcript may show them), the submissions and the sessions index's order.
"""

from __future__ import annotations

import sqlite3

from tether.errors import ConversationNotFound
from tether.records import RecordDraft
from tether.store._sessions import TruncatedLog
from tether.store._sqlite_log import index_attachments, insert_records, read
from tether.store._truncation import check_truncation, seal_anchor

__all__ = ("truncate_log",)


def truncate_log(
    conn: sqlite3.Connection, conversation_id: str, draft: RecordDraft, touched: list[str]
) -> TruncatedLog:
    """Replace the records of ``conversation_id`` up to the seq ``draft`` names by it, sealed
    in the place of the last one (see ``RetentionStore.truncate_log``)."""
    row = conn.execute(
        "SELECT number, session, head, bytes, "
        "(SELECT MIN(seq) FROM records WHERE conversation = number) "
        "FROM conversations WHERE id = ?",
        (conversation_id,),
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    number, session, head, size_before, first = row
    through = check_truncation(conversation_id, draft, head=head, first=first)
    # The record at ``through`` with its prevHash, from the row before it (or the one a
    # truncation kept, or none at seq 1).
    [replaced] = read(conn, conversation_id, through - 1, 1)
    anchor = seal_anchor(draft, conversation_id=conversation_id, session=session, replaced=replaced)
    removed, removed_bytes = conn.execute(
        "SELECT COUNT(*), SUM(length(CAST(body AS BLOB))) FROM records "
        "WHERE conversation = ? AND seq <= ?",
        (number, through),
    ).fetchone()
    conn.execute("DELETE FROM records WHERE conversation = ? AND seq <= ?", (number, through))
    insert_records(conn, number, [anchor])
    # Those its transcript shows were its removed records' (their references stay): a
    # statement only if the engine made it show another.
    index_attachments(conn, conversation_id, [anchor])
    conn.execute("DELETE FROM snapshots WHERE conversation = ? AND seq <= ?", (number, through))
    size_after = size_before - removed_bytes + len(anchor.canonical)
    conn.execute(
        "UPDATE conversations SET bytes = ?, first_prev_hash = ? WHERE number = ?",
        (size_after, bytes.fromhex(anchor.prev_hash) or None, number),
    )
    touched.append(conversation_id)  # a tailer behind the anchor reads it next
    return TruncatedLog(conversation_id, removed, through, size_before, size_after)
