"""The SQL of what a ``Store`` adds to its log and its submissions: the steps that must be
one commit across both (an execution's end with its claim's settlement, a decision with the
wake-up of the run it unblocks), and the heartbeat.

Each runs on the writer's connection inside its transaction (or a savepoint of it), which rolls the
whole step back if any part of it is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from tether._canonical import canonical_json
from tether.errors import ConversationNotFound
from tether.records import Record, RecordDraft
from tether.store._common import to_micros
from tether.store._sqlite_log import append_checked
from tether.store._sqlite_submissions import settled, update_owned
from tether.store._types import ClaimSettlement

__all__ = ("append_decision", "append_settled", "ping")


def append_settled(
    conn: sqlite3.Connection,
    conversation_id: str,
    drafts: Sequence[RecordDraft],
    expected_seq: int,
    fence: int,
    settle: ClaimSettlement,
    usage_holder: str | None,
    touched: list[str],
) -> list[Record]:
    """Settle the owned submission (waking its parent, if it is the last child the parent
    waits for), then append: the writer's transaction (or savepoint) rolls the settlement
    back if the append is refused."""
    submission = update_owned(
        conn,
        settle.submission_id,
        settle.attempt_id,
        "settle",
        "status = 'settled', lease_expires_at = NULL, settlement = ?, settled_at = ?",
        (canonical_json(settle.settlement), to_micros(settle.settled_at)),
    )
    settled(conn, submission)
    return append_checked(
        conn, conversation_id, drafts, expected_seq, fence, touched, usage_holder=usage_holder
    )


def append_decision(
    conn: sqlite3.Connection,
    conversation_id: str,
    drafts: Sequence[RecordDraft],
    expected_seq: int,
    wake: str | None,
    touched: list[str],
) -> list[Record]:
    """Append at the conversation's current fence and wake the submission waiting for the
    decision: the writer's transaction (or savepoint) rolls the wake-up back if the append
    is refused."""
    row = conn.execute(
        "SELECT fence FROM conversations WHERE id = ?", (conversation_id,)
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    fence = int(row[0])
    if wake is not None:
        conn.execute(
            "UPDATE submissions SET status = 'queued' WHERE id = ? AND status = 'waiting'", (wake,)
        )
    return append_checked(conn, conversation_id, drafts, expected_seq, fence, touched)


def ping(conn: sqlite3.Connection, now: datetime) -> None:
    """A one-row write: what proves the database takes writes (``Store.ping``)."""
    conn.execute(
        "INSERT INTO heartbeat (singleton, at) VALUES (1, ?) "
        "ON CONFLICT (singleton) DO UPDATE SET at = excluded.at",
        (to_micros(now),),
    )


# --- attachments ----------------------------------------------------------------------
