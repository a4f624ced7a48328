"""The SQL of erasure on SQLite (``RetentionStore.erase_session``): a session removed in one
commit, with the attachments only its log referenced, as a plain function over the
writer's connection."""

from __future__ import annotations

import sqlite3

from tether.errors import ConversationNotFound
from tether.store._sessions import ErasedSession
from tether.store._sqlite_text import forget_text
from tether.store._types import SessionKey

__all__ = ("erase_session",)


def erase_session(
    conn: sqlite3.Connection, conversation_id: str, touched: list[str]
) -> ErasedSession:
    """Everything of the conversation, in the caller's transaction: its submissions and their
    attempts, its records, snapshot and gates, its metadata and its messages' words, its
    references to attachments, and each attachment no other conversation references any
    more; then its row."""
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
    forget_text(conn, number)
    conn.execute("DELETE FROM session_metadata WHERE conversation = ?", (number,))
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
