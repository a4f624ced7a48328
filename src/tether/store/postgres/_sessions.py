"""Sessions on PostgreSQL: the sessions index, erasing a session, importing a log, and the
v7 backfill.

**The index.** A conversation's row keeps its last activity (``last_activity_at``, its last
record's time), its head (``records``) and the canonical bytes of its records (``bytes``),
moved by the one update of the row that every append already makes (``_log``): no append
pays a statement more. Each filter (none, the agent, the agent and instance) has an index in
the listing order, newest activity first, then the conversation id bytewise; a page past a
cursor starts where the index's bound says, and only the rows as old as the cursor's are
filtered by id.

**An erase** locks its submissions' rows and the conversation's (appends wait for it, then
find no conversation), in the order every other transaction takes them, then the
attachments its records reference, in digest order, before a statement of its own checks
whether another conversation references them: two conversations erased at once that share
an attachment cannot each keep it for the other. Everything else goes in one statement.

**An import** writes the conversation row, then its records in batches as they are checked
(``ImportCheck``: the chain, the record its own log begins with), the gates of its own records
(a fork's copied ones stay its parent's) and what they reference, then the row's anchor, in
one transaction: a log streamed from a file is never held whole, and a record that fails
rolls it all back.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import Final

from psycopg import AsyncConnection
from psycopg.errors import DeadlockDetected
from psycopg.rows import TupleRow

from tether._payloads import ConversationParent
from tether.errors import ConversationNotFound, SessionExists, StoreUnavailable
from tether.records import Record
from tether.store._common import (
    attachment_digests,
    check_limit,
    check_session_filter,
    decode_session_cursor,
    encode_session_cursor,
    from_micros,
    record_time,
    to_micros,
)
from tether.store._import import ImportCheck
from tether.store._sessions import ErasedSession, SessionRow
from tether.store._types import Conversation, SessionKey
from tether.store.postgres._gates import index_gates
from tether.store.postgres._log import (
    Channels,
    insert_conversation,
    insert_records,
    notify,
)
from tether.store.postgres._refs import INSERT_REFS, index_refs

__all__ = ("backfill", "erase", "erase_session", "import_conversation", "list_sessions")

Conn = AsyncConnection[TupleRow]

_ERASE_ATTEMPTS: Final = 5

_SESSION_COLUMNS: Final = (
    "id, agent, instance, session, created_at, parent, last_activity_at, head, bytes"
)
_ORDER: Final = 'last_activity_at DESC, id COLLATE "C"'
"""The listing order, spelled as its indexes are."""
_PAST: Final = 'last_activity_at <= %s AND (last_activity_at < %s OR id COLLATE "C" > %s)'
"""The rows past a cursor: the first term bounds the index scan, the second filters out only
the rows as old as the cursor's."""


def _row(row: TupleRow) -> SessionRow:
    cid, agent, instance, session, created_at, parent, last_activity_at, head, size = row
    return SessionRow(
        conversation_id=cid,
        key=SessionKey(agent, instance, session),
        created_at=created_at,
        last_activity_at=last_activity_at,
        records=int(head),
        bytes=int(size),
        parent=None if parent is None else ConversationParent.model_validate_json(bytes(parent)),
        cursor=encode_session_cursor(to_micros(last_activity_at), cid),
    )


async def list_sessions(
    conn: Conn, agent: str | None, instance: str | None, limit: int, after: str | None
) -> list[SessionRow]:
    check_limit(limit)
    check_session_filter(agent, instance)
    start = decode_session_cursor(after) if after is not None else None
    if any(value is not None and "\x00" in value for value in (agent, instance)):
        return []  # no text column holds a NUL: nothing matches (and libpq cannot send it)
    terms: list[str] = []
    params: list[object] = []
    for column, value in (("agent", agent), ("instance", instance)):
        if value is not None:
            terms.append(f"{column} = %s")
            params.append(value)
    if start is not None:
        moment = from_micros(start[0])
        terms.append(_PAST)
        params += [moment, moment, start[1]]
    where = f"WHERE {' AND '.join(terms)} " if terms else ""
    rows = await (
        await conn.execute(
            f"SELECT {_SESSION_COLUMNS} FROM conversations {where}ORDER BY {_ORDER} LIMIT %s",
            [*params, limit],
        )
    ).fetchall()
    return [_row(row) for row in rows]


_ERASE: Final = """
WITH records_gone AS (
    DELETE FROM records WHERE conversation_id = %(cid)s RETURNING 1
), snapshot_gone AS (
    DELETE FROM snapshots WHERE conversation_id = %(cid)s RETURNING 1
), gates_gone AS (
    DELETE FROM gates WHERE conversation_id = %(cid)s
), refs_gone AS (
    DELETE FROM attachment_refs WHERE conversation_id = %(cid)s
), attempts_gone AS (
    DELETE FROM attempts WHERE submission_id IN (
        SELECT id FROM submissions WHERE conversation_id = %(cid)s
    )
), submissions_gone AS (
    DELETE FROM submissions WHERE conversation_id = %(cid)s RETURNING 1
), attachments_gone AS (
    DELETE FROM attachments a WHERE a.digest = ANY(%(digests)s::text[]) AND NOT EXISTS (
        SELECT 1 FROM attachment_refs r
        WHERE r.digest = a.digest AND r.conversation_id <> %(cid)s
    )
    RETURNING a.digest
), conversation_gone AS (
    DELETE FROM conversations WHERE id = %(cid)s
)
SELECT (SELECT count(*) FROM records_gone), (SELECT count(*) FROM submissions_gone),
       EXISTS (SELECT 1 FROM snapshot_gone),
       ARRAY(SELECT digest FROM attachments_gone ORDER BY digest COLLATE "C"),
       pg_notify(%(channel)s, %(payload)s)
"""
"""Everything of a conversation, in one statement: its rows reference one another only
through foreign keys checked at the statement's end, when all of them are gone. The append
notification wakes its tailers, who then find no conversation."""


async def erase(
    run: Callable[..., Awaitable[ErasedSession]], conversation_id: str, channels: Channels
) -> ErasedSession:
    """``erase_session`` in a transaction (``run``), begun again if it deadlocked: a
    submission of the conversation admitted while it ran may be locked by a claim or a
    settlement in the other order (the erase took the ones it found first)."""
    for attempt in itertools.count(1):
        try:
            return await run(erase_session, conversation_id, channels)
        except StoreUnavailable as exc:
            if attempt == _ERASE_ATTEMPTS or not isinstance(exc.__cause__, DeadlockDetected):
                raise
    raise AssertionError("unreachable")


async def erase_session(conn: Conn, conversation_id: str, channels: Channels) -> ErasedSession:
    """Remove the conversation and everything of it, in the caller's transaction."""
    # Its submissions' rows before the conversation's, the order every claim, settlement
    # and decision locks them in.
    await conn.execute(
        "SELECT 1 FROM submissions WHERE conversation_id = %s ORDER BY position FOR UPDATE",
        (conversation_id,),
    )
    row = await (
        await conn.execute(
            "SELECT agent, instance, session FROM conversations WHERE id = %s FOR UPDATE",
            (conversation_id,),
        )
    ).fetchone()
    if row is None:
        raise ConversationNotFound(conversation_id)
    key = SessionKey(*row)
    # Its attachments, locked in digest order (as every erase locks them): an erase of
    # another conversation that references them too commits first, or waits for this one.
    # The statement that checks the other references starts once the locks are held.
    digests = [
        digest
        for (digest,) in await (
            await conn.execute(
                "SELECT digest FROM attachments WHERE digest IN ("
                "SELECT digest FROM attachment_refs WHERE conversation_id = %s) "
                'ORDER BY digest COLLATE "C" FOR UPDATE',
                (conversation_id,),
            )
        ).fetchall()
    ]
    erased = await (
        await conn.execute(
            _ERASE,
            {
                "cid": conversation_id,
                "digests": digests,
                "channel": channels.append,
                "payload": f"{conversation_id}:0",
            },
        )
    ).fetchone()
    assert erased is not None  # a bare SELECT returns its row
    records, submissions, snapshot, gone, _ = erased
    return ErasedSession(
        conversation_id=conversation_id,
        key=key,
        records=int(records),
        submissions=int(submissions),
        snapshot=bool(snapshot),
        attachments=tuple(gone),
    )


async def import_conversation(
    conn: Conn, conversation: Conversation, records: Iterable[Record], channels: Channels
) -> bool:
    """Create ``conversation`` holding exactly ``records``, each checked as it comes
    (:class:`ImportCheck`) and written in batches, in the caller's transaction (a record
    that fails rolls it all back); ``False`` if the store holds that very log already."""
    check = ImportCheck(conversation)
    if not await insert_conversation(conn, conversation, None):
        # Its id or its session key is taken: by this log (the head hash seals all of it,
        # the key and the parent included), or by another. The whole log is checked first.
        for _ in check.batches(records):
            pass
        last = check.finish()
        held = await (
            await conn.execute(
                "SELECT head, head_hash FROM conversations WHERE id = %s", (conversation.id,)
            )
        ).fetchone()
        if held is not None and (int(held[0]), bytes(held[1]).hex()) == (last.seq, last.hash):
            return False
        raise SessionExists(str(conversation.key))
    for batch in check.batches(records):
        await insert_records(conn, conversation.id, batch)
        # Its own records' gates (a fork's copied ones are its parent's); a truncated log's
        # records start at its anchor, so they are told apart by seq, not by position.
        await index_gates(conn, conversation.id, [r for r in batch if r.seq >= check.start])
        await index_refs(conn, conversation.id, batch)
    last = check.finish()
    await conn.execute(
        "UPDATE conversations SET head = %s, head_hash = %s, "
        "last_activity_at = %s::timestamptz, bytes = %s WHERE id = %s",
        (
            last.seq,
            bytes.fromhex(last.hash),
            record_time(last.canonical),
            check.bytes,
            conversation.id,
        ),
    )
    await notify(conn, channels.append, f"{conversation.id}:{last.seq}")
    return True


# --- the v7 backfill ------------------------------------------------------------------


async def backfill(conn: Conn) -> None:
    """Derive what v7 keeps from the logs already stored: each conversation's bytes, last
    activity (its head record's time) and the attachments its records reference.
    Idempotent: it computes the same values again from the same logs."""
    await conn.execute(
        "UPDATE conversations c SET bytes = s.total FROM ("
        "SELECT conversation_id, sum(length(body))::bigint AS total FROM records "
        "GROUP BY conversation_id) s WHERE c.id = s.conversation_id"
    )
    ids: list[str] = []
    times: list[datetime] = []
    async with conn.cursor(name="tether_sessions_backfill") as cursor:
        await cursor.execute(
            "SELECT c.id, r.body FROM conversations c "
            "JOIN records r ON r.conversation_id = c.id AND r.seq = c.head"
        )
        async for cid, body in cursor:
            ids.append(cid)
            times.append(datetime.fromisoformat(record_time(bytes(body))))
    await conn.execute(
        "UPDATE conversations c SET last_activity_at = u.at "
        "FROM unnest(%s::text[], %s::timestamptz[]) AS u(id, at) WHERE c.id = u.id",
        (ids, times),
    )
    references: dict[str, list[Record]] = {}
    async with conn.cursor(name="tether_refs_backfill") as cursor:
        await cursor.execute(
            "SELECT conversation_id, seq, kind, body FROM records "
            "WHERE kind IN ('user_message', 'steer_received') "
            "AND position('\"attachments\":'::bytea IN body) > 0"
        )
        async for cid, seq, kind, body in cursor:
            references.setdefault(cid, []).append(Record(int(seq), kind, bytes(body), "", ""))
    for cid, carrying in references.items():
        digests = attachment_digests(carrying)
        if digests:
            await conn.execute(INSERT_REFS.format(where=""), {"cid": cid, "digests": digests})
