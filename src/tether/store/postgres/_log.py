"""The SQL of the PostgreSQL store's logs: conversations, records, fences, forks.

Every function takes a connection; the caller decides whether it runs in a transaction.
Rows are locked explicitly (``FOR UPDATE``) where a decision depends on them, so READ
COMMITTED is enough: appends to a conversation serialize on its row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether._canonical import canonical_json
from tether._payloads import ConversationParent
from tether.errors import (
    ConversationNotFound,
    SeqTruncated,
    SessionExists,
)
from tether.records import Actor, Record, RecordDraft
from tether.store._common import (
    attachment_digests,
    check_fork_seq,
    fork_parent,
    record_time,
    seal_append,
    seal_created,
)
from tether.store._gates import has_gate_changes
from tether.store._types import (
    ClaimSettlement,
    Conversation,
    SessionKey,
)
from tether.store._usage import spends_of
from tether.store.postgres._children import wake_parent
from tether.store.postgres._gates import index_gates
from tether.store.postgres._refs import INSERT_REFS, index_refs
from tether.store.postgres._text import INSERT_TEXT, index_text, text_rows
from tether.store.postgres._usage import add_usage

__all__ = (
    "LAST_IN_SESSION",
    "RECORD_COLUMNS",
    "AppendedIfHead",
    "Channels",
    "Conn",
    "append",
    "append_if_head",
    "ensure_conversation",
    "find_conversation",
    "fork",
    "fork_prefix",
    "get_conversation",
    "head",
    "insert_conversation",
    "insert_records",
    "log_bytes",
    "mint_fence",
    "notify",
    "read",
    "read_all",
    "record_of",
    "stored_parent",
)

Conn = AsyncConnection[TupleRow]

RECORD_COLUMNS = "seq, kind, body, prev_hash, hash"
_CONVERSATION_COLUMNS = "id, agent, instance, session, created_at, parent, tenant"


class Channels:
    """The NOTIFY channels of one schema (schemas sharing a database stay apart)."""

    def __init__(self, schema: str) -> None:
        self.append = f"{schema}.append"
        self.work = f"{schema}.work"
        self.settled = f"{schema}.settled"
        self.steer = f"{schema}.steer"
        """A steer or follow-up was admitted; the payload is its conversation's id."""


async def notify(conn: Conn, channel: str, payload: str) -> None:
    # Delivered at commit, and only if the transaction commits.
    await conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


# --- conversations and records --------------------------------------------------------


def _conversation(row: TupleRow) -> Conversation:
    cid, agent, instance, session, created_at, parent, tenant = row
    return Conversation(
        cid,
        SessionKey(agent, instance, session),
        created_at,
        None if parent is None else ConversationParent.model_validate_json(bytes(parent)),
        tenant,
    )


def record_of(row: TupleRow) -> Record:
    """A stored row as a record (digests are stored as raw bytes, carried as hex)."""
    seq, kind, body, prev_hash, hash_ = row
    return Record(seq, kind, bytes(body), bytes(prev_hash).hex(), bytes(hash_).hex())


async def get_conversation(conn: Conn, conversation_id: str) -> Conversation:
    row = await (
        await conn.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations WHERE id = %s", (conversation_id,)
        )
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return _conversation(row)


async def find_conversation(conn: Conn, key: SessionKey) -> Conversation | None:
    row = await (
        await conn.execute(
            f"SELECT {_CONVERSATION_COLUMNS} FROM conversations "
            "WHERE agent = %s AND instance = %s AND session = %s",
            (key.agent, key.instance, key.session),
        )
    ).fetchone()
    return None if row is None else _conversation(row)


async def insert_records(conn: Conn, conversation_id: str, records: Sequence[Record]) -> None:
    async with conn.cursor() as cursor:
        await cursor.executemany(
            "INSERT INTO records (conversation_id, seq, kind, body, prev_hash, hash, "
            "submission_id) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    conversation_id,
                    r.seq,
                    r.kind,
                    r.canonical,
                    bytes.fromhex(r.prev_hash),
                    bytes.fromhex(r.hash),
                    _settled_submission(r),
                )
                for r in records
            ],
        )


def stored_parent(parent: ConversationParent | None) -> bytes | None:
    """A conversation's ``parent`` as its column keeps it."""
    return None if parent is None else canonical_json(parent.to_json_object())


async def _create_conversation(
    conn: Conn,
    conversation: Conversation,
    channels: Channels,
    prefix: Sequence[Record] = (),
    by: Actor | None = None,
) -> bool:
    """Insert the conversation with its records; ``False`` if the session already has one."""
    first = seal_created(conversation, prefix, by)
    records = [*prefix, first]
    if not await insert_conversation(
        conn, conversation, records, conflict="(agent, instance, session)"
    ):
        return False
    await insert_records(conn, conversation.id, records)
    await index_refs(conn, conversation.id, records)
    await index_text(conn, conversation.id, records)
    await notify(conn, channels.append, f"{conversation.id}:{first.seq}")
    return True


async def insert_conversation(
    conn: Conn,
    conversation: Conversation,
    records: Sequence[Record] | None,
    *,
    conflict: str = "",
) -> bool:
    """Insert the row of ``conversation`` whose log will be ``records`` (inserted next, in
    the same transaction): its head, head hash, last activity and bytes are theirs (with
    ``None``, an import's, left at nothing for it to set once its records are in).
    ``False``, inserting nothing, if a unique column (those ``conflict`` names, or any)
    is taken."""
    key = conversation.key
    last = records[-1] if records else None
    created = await (
        await conn.execute(
            "INSERT INTO conversations (id, agent, instance, session, created_at, parent, head, "
            "head_hash, last_activity_at, bytes, tenant) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::timestamptz, %s, %s) "
            f"ON CONFLICT {conflict} DO NOTHING RETURNING id",
            (
                conversation.id,
                key.agent,
                key.instance,
                key.session,
                conversation.created_at,
                stored_parent(conversation.parent),
                0 if last is None else last.seq,
                b"" if last is None else bytes.fromhex(last.hash),
                conversation.created_at if last is None else record_time(last.canonical),
                log_bytes(records or ()),
                conversation.tenant,
            ),
        )
    ).fetchone()
    return created is not None


def log_bytes(records: Sequence[Record]) -> int:
    """What ``records`` add to their conversation's ``bytes``: their canonical bytes."""
    return sum(len(record.canonical) for record in records)


async def ensure_conversation(
    conn: Conn,
    key: SessionKey,
    conversation_id: str,
    created_at: datetime,
    channels: Channels,
    parent: ConversationParent | None = None,
    tenant: str | None = None,
    by: Actor | None = None,
) -> tuple[Conversation, bool]:
    """The session's conversation, created (linked to ``parent``, if given; of ``tenant``;
    made by ``by``) if it is new."""
    conversation = Conversation(conversation_id, key, created_at, parent, tenant)
    if await _create_conversation(conn, conversation, channels, by=by):
        return conversation, True
    existing = await find_conversation(conn, key)
    assert existing is not None  # the insert lost to it
    return existing, False


async def mint_fence(conn: Conn, conversation_id: str) -> int:
    row = await (
        await conn.execute(
            "UPDATE conversations SET fence = fence + 1 WHERE id = %s RETURNING fence",
            (conversation_id,),
        )
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return int(row[0])


async def get_snapshot(conn: Conn, conversation_id: str) -> tuple[int, bytes] | None:
    row = await (
        await conn.execute(
            "SELECT seq, body FROM snapshots WHERE conversation_id = %s", (conversation_id,)
        )
    ).fetchone()
    return None if row is None else (int(row[0]), bytes(row[1]))


async def head(conn: Conn, conversation_id: str) -> int:
    row = await (
        await conn.execute("SELECT head FROM conversations WHERE id = %s", (conversation_id,))
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    return int(row[0])


async def read(conn: Conn, conversation_id: str, after_seq: int, limit: int) -> list[Record]:
    rows = await (
        await conn.execute(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE conversation_id = %s AND seq > %s "
            "ORDER BY seq LIMIT %s",
            (conversation_id, after_seq, limit),
        )
    ).fetchall()
    if not rows:
        await head(conn, conversation_id)  # ConversationNotFound for an unknown id
    return [record_of(row) for row in rows]


async def read_all(conn: Conn, conversation_id: str) -> tuple[list[Record], int, str]:
    """The whole log with the anchor (head seq and hash) of its conversation row, for
    verification: one statement, so one snapshot."""
    rows = await (
        await conn.execute(
            "SELECT c.head, c.head_hash, r.seq, r.kind, r.body, r.prev_hash, r.hash "
            "FROM conversations c LEFT JOIN records r ON r.conversation_id = c.id "
            "WHERE c.id = %s ORDER BY r.seq",
            (conversation_id,),
        )
    ).fetchall()
    if not rows:
        raise ConversationNotFound(conversation_id)
    records = [record_of(row[2:]) for row in rows if row[2] is not None]
    return records, int(rows[0][0]), bytes(rows[0][1]).hex()


async def append(
    conn: Conn,
    conversation_id: str,
    drafts: Sequence[RecordDraft],
    expected_seq: int,
    fence: int,
    channels: Channels,
    *,
    usage_holder: str | None = None,
) -> tuple[list[Record], str]:
    """The checked append (the records and the conversation's session), in a transaction;
    what the records spend is added to the conversation's tenant's usage in it (giving back
    reservations of ``usage_holder``, the conversation's if ``None``)."""
    # The row lock orders every append of this conversation: seqs commit in order.
    row = await (
        await conn.execute(
            "SELECT c.fence, c.session, c.head, c.head_hash, r.body, c.tenant "
            "FROM conversations c "
            "LEFT JOIN records r ON r.conversation_id = c.id AND r.seq = c.head "
            "WHERE c.id = %s FOR UPDATE OF c",
            (conversation_id,),
        )
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    current_fence, session, current_head, head_hash, head_body, tenant = row
    sealed = seal_append(
        drafts,
        conversation_id=conversation_id,
        expected_seq=expected_seq,
        fence=fence,
        current_fence=current_fence,
        session=session,
        head=current_head,
        head_hash=bytes(head_hash).hex(),
        head_time=record_time(bytes(head_body)) if head_body is not None else "",
    )
    await insert_records(conn, conversation_id, sealed)
    last = sealed[-1]
    await conn.execute(
        "UPDATE conversations SET head = %s, head_hash = %s, "
        "last_activity_at = %s::timestamptz, bytes = bytes + %s WHERE id = %s",
        (
            last.seq,
            bytes.fromhex(last.hash),
            record_time(last.canonical),
            log_bytes(sealed),
            conversation_id,
        ),
    )
    await index_gates(conn, conversation_id, sealed)
    await index_refs(conn, conversation_id, sealed)
    await index_text(conn, conversation_id, sealed)
    if tenant is not None:
        await add_usage(conn, tenant, usage_holder or conversation_id, sealed)
    await notify(conn, channels.append, f"{conversation_id}:{sealed[-1].seq}")
    return sealed, session


_INSERT_SEALED = """
    INSERT INTO records (conversation_id, seq, kind, body, prev_hash, hash, submission_id)
    SELECT %(cid)s, r.seq, r.kind, r.body, r.prev_hash, r.hash, r.submission_id
    FROM unnest(%(seqs)s::bigint[], %(kinds)s::text[], %(bodies)s::bytea[],
                %(prevs)s::bytea[], %(hashes)s::bytea[], %(submissions)s::text[])
         AS r(seq, kind, body, prev_hash, hash, submission_id)
    WHERE EXISTS (SELECT 1 FROM moved)
    RETURNING 1
"""
# The head, the last activity and the bytes move in the one update of the row.
_MOVE_HEAD = """
    UPDATE conversations SET head = %(head)s, head_hash = %(hash)s,
        last_activity_at = %(at)s::timestamptz, bytes = bytes + %(bytes)s
    WHERE id = %(cid)s AND head = %(expected)s AND head_hash = %(prev)s AND fence <= %(fence)s
"""
_REFS = f"""
), referenced AS ({INSERT_REFS.format(where="WHERE EXISTS (SELECT 1 FROM moved) ")}"""
_TEXTS = f"""
), texted AS ({INSERT_TEXT.format(where="WHERE EXISTS (SELECT 1 FROM moved) ")}"""
_APPEND_IF_HEAD = """
WITH moved AS ({move} RETURNING id
), written AS ({insert}{refs})
SELECT (SELECT count(*) FROM written), (SELECT pg_notify(%(channel)s, %(payload)s) FROM moved)
"""
_APPEND_IF_HEAD_STATEMENTS = tuple(
    _APPEND_IF_HEAD.format(move=_MOVE_HEAD, insert=_INSERT_SEALED, refs=refs + texts)
    for texts in ("", _TEXTS)
    for refs in ("", _REFS)
)
"""Without, then with, the references of records that carry attachments; then the same with
the words of the messages among them (``_statement``)."""
# The claim is locked first and the head moves only while it holds, so the settlement and
# the records commit together or not at all; so does the wake of a child's parent. Whether
# the session has a next submission queued rides on the settlement's NOTIFY (LAST_IN_SESSION
# if not), so that no worker looks for a head that cannot be there.
_APPEND_SETTLED_IF_HEAD = """
WITH owned AS (
    SELECT id FROM submissions
    WHERE id = %(sid)s AND status = 'running' AND attempt_id = %(aid)s
    FOR UPDATE
), moved AS ({move} AND EXISTS (SELECT 1 FROM owned) RETURNING id
), settled AS (
    UPDATE submissions SET status = 'settled', lease_expires_at = NULL,
        settlement = %(settlement)s, settled_at = %(settled_at)s
    WHERE id = (SELECT id FROM owned) AND EXISTS (SELECT 1 FROM moved)
    RETURNING id, parent_submission_id
), following AS (
    SELECT EXISTS (
        SELECT 1 FROM submissions q WHERE q.conversation_id = %(cid)s
        AND q.status <> 'settled' AND q.status = 'queued'
    ) AS queued
), written AS ({insert}{refs})
SELECT (SELECT count(*) FROM written), (SELECT count(*) FROM settled),
       (SELECT pg_notify(%(channel)s, %(payload)s) FROM moved),
       (SELECT pg_notify(%(settled_channel)s, id || CASE WHEN f.queued THEN ''
                                                         ELSE %(last)s END)
        FROM settled, following f),
       (SELECT {wake} FROM settled),
       (SELECT queued FROM following)
"""
LAST_IN_SESSION = " last"
"""Ends a settlement's NOTIFY payload when its session had no next submission queued (a
payload without it may have one: it wakes the claim loops)."""
_APPEND_SETTLED_IF_HEAD_STATEMENTS = tuple(
    _APPEND_SETTLED_IF_HEAD.format(
        move=_MOVE_HEAD,
        insert=_INSERT_SEALED,
        refs=refs + texts,
        wake=wake_parent("parent_submission_id", "%(work_channel)s"),
    )
    for texts in ("", _TEXTS)
    for refs in ("", _REFS)
)


def _if_head_params(
    conversation_id: str,
    sealed: Sequence[Record],
    expected_seq: int,
    fence: int,
    channels: Channels,
) -> dict[str, Any]:
    text_seqs, texts = text_rows(sealed)
    return {
        "cid": conversation_id,
        "head": sealed[-1].seq,
        "hash": bytes.fromhex(sealed[-1].hash),
        "expected": expected_seq,
        "prev": bytes.fromhex(sealed[0].prev_hash),
        "fence": fence,
        "seqs": [r.seq for r in sealed],
        "kinds": [r.kind for r in sealed],
        "bodies": [r.canonical for r in sealed],
        "prevs": [bytes.fromhex(r.prev_hash) for r in sealed],
        "hashes": [bytes.fromhex(r.hash) for r in sealed],
        "submissions": [_settled_submission(r) for r in sealed],
        "channel": channels.append,
        "payload": f"{conversation_id}:{sealed[-1].seq}",
        "at": record_time(sealed[-1].canonical),
        "bytes": log_bytes(sealed),
        "digests": attachment_digests(sealed),
        "text_seqs": text_seqs,
        "texts": texts,
    }


def _statement(params: dict[str, Any]) -> int:
    """Which of a statement's variants writes what ``params`` carry: references, words."""
    return (1 if params["digests"] else 0) + (2 if params["text_seqs"] else 0)


async def append_if_head(
    conn: Conn,
    conversation_id: str,
    sealed: Sequence[Record],
    expected_seq: int,
    fence: int,
    settle: ClaimSettlement | None,
    channels: Channels,
    spends: bool = True,
) -> AppendedIfHead | None:
    """Write records sealed against a head this process believes current, in one statement
    (its own transaction), settling ``settle``'s claim with them if given: ``None``, writing
    nothing, unless the head, its hash, the fence (and the claim) still allow it. The
    conversation's row lock still orders the seqs. Records that change a gate are declined
    (``None``) before anything runs: the checked path indexes them; so are records that
    spend, unless ``spends`` is false (the conversation is known to be of no tenant): the
    checked path adds them to the tenant's usage."""
    if has_gate_changes(sealed) or (spends and spends_of(sealed)):
        return None
    params = _if_head_params(conversation_id, sealed, expected_seq, fence, channels)
    refs = _statement(params)
    if settle is None:
        row = await (await conn.execute(_APPEND_IF_HEAD_STATEMENTS[refs], params)).fetchone()
        return AppendedIfHead() if row is not None and row[0] == len(sealed) else None
    params |= {
        "sid": settle.submission_id,
        "aid": settle.attempt_id,
        "settlement": canonical_json(dict(settle.settlement)),
        "settled_at": settle.settled_at,
        "settled_channel": channels.settled,
        "work_channel": channels.work,
        "last": LAST_IN_SESSION,
    }
    row = await (await conn.execute(_APPEND_SETTLED_IF_HEAD_STATEMENTS[refs], params)).fetchone()
    if row is None or row[0] != len(sealed) or row[1] != 1:
        return None
    return AppendedIfHead(more_work=bool(row[5]) or bool(row[4]))


@dataclass(frozen=True, slots=True)
class AppendedIfHead:
    """What :func:`append_if_head` wrote: ``more_work`` unless it settled a claim whose
    session had no next submission queued and whose parent (if any) it did not wake."""

    more_work: bool = True


def _settled_submission(record: Record) -> str | None:
    if record.kind != "submission_settled":
        return None
    return record.submission_id


async def fork(
    conn: Conn,
    conversation_id: str,
    at_seq: int,
    key: SessionKey,
    new_conversation_id: str,
    created_at: datetime,
    channels: Channels,
    by: Actor | None = None,
) -> Conversation:
    source = await get_conversation(conn, conversation_id)
    check_fork_seq(conversation_id, at_seq, await head(conn, conversation_id))
    prefix = await fork_prefix(conn, conversation_id, at_seq)
    conversation = Conversation(
        new_conversation_id, key, created_at, fork_parent(conversation_id, at_seq), source.tenant
    )
    if not await _create_conversation(conn, conversation, channels, prefix, by):
        raise SessionExists(str(key))
    # A snapshot of the shared records describes the child's first records as well.
    await conn.execute(
        "INSERT INTO snapshots (conversation_id, seq, body) SELECT %s, seq, body "
        "FROM snapshots WHERE conversation_id = %s AND seq <= %s",
        (new_conversation_id, conversation_id, at_seq),
    )
    return conversation


async def fork_prefix(conn: Conn, conversation_id: str, at_seq: int) -> list[Record]:
    """The records a fork at ``at_seq`` (at most the head) copies: from seq 1, or from the
    anchor of a log retention truncated; ``SeqTruncated`` if ``at_seq`` is before it. One
    statement, so one snapshot: a truncation committing meanwhile is seen whole or not at all."""
    rows = await (
        await conn.execute(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE conversation_id = %s AND seq <= %s "
            "ORDER BY seq",
            (conversation_id, at_seq),
        )
    ).fetchall()
    if rows:
        return [record_of(row) for row in rows]
    first = await (
        await conn.execute(
            "SELECT min(seq) FROM records WHERE conversation_id = %s", (conversation_id,)
        )
    ).fetchone()
    if first is None or first[0] is None:
        raise ConversationNotFound(conversation_id)  # erased since its head was read
    raise SeqTruncated(conversation_id, at_seq, int(first[0]))
