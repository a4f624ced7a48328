"""Retention on PostgreSQL: truncating a log's head, and keeping a snapshot of a log that
may be truncated meanwhile (a fork's prefix is read in ``_log.fork_prefix``).

**A truncation** (``RetentionStore.truncate_log``) is one transaction. It locks the conversation's
row as a checked append does (``FOR UPDATE``: appends, erasures and other truncations of the
log serialize with it; the one-statement append waits for the row and then finds its head
unchanged), then, in a statement of its own (so that its snapshot is taken once the lock is
held), reads the log's first seq and the record at the seq the anchor names. One statement
then deletes the records before that seq, turns that record's row into the anchor (in place:
the seq and both hashes are the removed record's), drops a snapshot at or before it, moves
the conversation's ``bytes`` and NOTIFYs the append channel. The head, its hash and the last
activity stay; so do the gates and ``attachment_refs`` (the anchor's transcript may show what
they index), which no foreign key ties to a record.

**A snapshot** is put in a transaction that first takes the conversation row's ``FOR KEY
SHARE`` lock (the one a new snapshot's foreign key takes anyway; of the appends, only a
checked one's lock conflicts with it), so that its check of the log's first seq reads what
a truncation in flight committed. In one statement the check would read the log as it was
before, and the insert, waiting for the row's lock, would then keep a snapshot of records
the truncation removed."""

from __future__ import annotations

from typing import Final

from tether.errors import ConversationNotFound, LogTampered
from tether.records import RecordDraft
from tether.store._sessions import TruncatedLog
from tether.store._truncation import check_truncation, seal_anchor, truncated_through
from tether.store.postgres._log import Channels, Conn, record_of

__all__ = ("put_snapshot", "truncate_log")

_LOCK: Final = "SELECT session, head, bytes FROM conversations WHERE id = %s FOR UPDATE"
_FIRST_AND_REPLACED: Final = (
    "SELECT f.first, r.seq, r.kind, r.body, r.prev_hash, r.hash "
    "FROM (SELECT min(seq) AS first FROM records WHERE conversation_id = %(cid)s) f "
    "LEFT JOIN records r ON r.conversation_id = %(cid)s AND r.seq = %(through)s"
)
"""The log's first seq (1, or its anchor's) and the record at ``through``, if there is one."""
_TRUNCATE: Final = """
WITH removed AS (
    DELETE FROM records WHERE conversation_id = %(cid)s AND seq < %(through)s
    RETURNING length(body) AS size
), anchored AS (
    UPDATE records SET kind = %(kind)s, body = %(body)s, prev_hash = %(prev)s, hash = %(hash)s,
        submission_id = NULL
    WHERE conversation_id = %(cid)s AND seq = %(through)s
    RETURNING 1
), snapshot_gone AS (
    DELETE FROM snapshots WHERE conversation_id = %(cid)s AND seq <= %(through)s
), sized AS (
    UPDATE conversations
    SET bytes = bytes - %(replaced)s + %(anchor)s - (SELECT COALESCE(sum(size), 0) FROM removed)
    WHERE id = %(cid)s
    RETURNING bytes
)
SELECT (SELECT count(*) FROM removed), (SELECT count(*) FROM anchored),
       (SELECT bytes FROM sized), pg_notify(%(channel)s, %(payload)s)
"""
"""Everything the truncation writes, in one statement: the records before the anchor's seq,
the record at it rewritten as the anchor (no other row has that key, so no insert is ordered
against the delete), a snapshot of removed records, and the conversation's size."""


async def truncate_log(
    conn: Conn, conversation_id: str, anchor: RecordDraft, channels: Channels
) -> TruncatedLog:
    """Replace the head of the log up to the seq ``anchor`` names by it, in the caller's
    transaction (see ``RetentionStore.truncate_log``)."""
    locked = await (await conn.execute(_LOCK, (conversation_id,))).fetchone()
    if locked is None:
        raise ConversationNotFound(conversation_id)
    session, head, bytes_before = str(locked[0]), int(locked[1]), int(locked[2])
    through = truncated_through(anchor)  # ValueError for a draft that is no anchor
    row = await (
        await conn.execute(_FIRST_AND_REPLACED, {"cid": conversation_id, "through": through})
    ).fetchone()
    assert row is not None  # an aggregate returns its row
    first = 1 if row[0] is None else int(row[0])
    check_truncation(conversation_id, anchor, head=head, first=first)
    if row[1] is None:  # within first..head, so the log lacks a record it should hold
        raise LogTampered(conversation_id, through, f"no record at seq {through}")
    replaced = record_of(row[1:])
    sealed = seal_anchor(
        anchor, conversation_id=conversation_id, session=session, replaced=replaced
    )
    written = await (
        await conn.execute(
            _TRUNCATE,
            {
                "cid": conversation_id,
                "through": through,
                "kind": sealed.kind,
                "body": sealed.canonical,
                "prev": bytes.fromhex(sealed.prev_hash),
                "hash": bytes.fromhex(sealed.hash),
                "replaced": len(replaced.canonical),
                "anchor": len(sealed.canonical),
                "channel": channels.append,
                "payload": f"{conversation_id}:{head}",
            },
        )
    ).fetchone()
    assert written is not None  # a bare SELECT returns its row
    deleted, anchored, bytes_after, _ = written
    assert anchored == 1  # the row read under the lock is still there
    return TruncatedLog(
        conversation_id=conversation_id,
        removed=int(deleted) + 1,  # the record the anchor replaced, too
        first_seq=through,
        bytes_before=bytes_before,
        bytes_after=int(bytes_after),
    )


_PUT_SNAPSHOT: Final = """
INSERT INTO snapshots (conversation_id, seq, body)
SELECT %(cid)s, %(seq)s, %(body)s
FROM (SELECT min(seq) AS first FROM records WHERE conversation_id = %(cid)s) f
WHERE f.first = 1 OR f.first < %(seq)s
ON CONFLICT (conversation_id) DO UPDATE SET seq = excluded.seq, body = excluded.body
WHERE excluded.seq > snapshots.seq
"""
"""A snapshot, kept unless it is older than the one kept, or at or before the anchor of a
truncated log (it describes records retention removed)."""


async def put_snapshot(conn: Conn, conversation_id: str, seq: int, body: bytes) -> None:
    """Keep a snapshot of the log at ``seq``, in the caller's transaction."""
    locked = await (
        await conn.execute(
            "SELECT 1 FROM conversations WHERE id = %s FOR KEY SHARE", (conversation_id,)
        )
    ).fetchone()
    if locked is None:
        raise ConversationNotFound(conversation_id)
    await conn.execute(_PUT_SNAPSHOT, {"cid": conversation_id, "seq": seq, "body": body})
