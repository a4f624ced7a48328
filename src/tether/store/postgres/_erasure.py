"""Erasure on PostgreSQL (``RetentionStore.erase_session``): a session removed in one
transaction, with the attachments no other log references.

An erase locks its submissions' rows and the conversation's (appends wait for it, then
find no conversation), in the order every other transaction takes them, then the
attachments its records reference, in digest order, before a statement of its own checks
whether another conversation references them: two conversations erased at once that share
an attachment cannot each keep it for the other. Everything else goes in one statement.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Final

from psycopg import AsyncConnection
from psycopg.errors import DeadlockDetected
from psycopg.rows import TupleRow

from tether.errors import ConversationNotFound, StoreUnavailable
from tether.store._sessions import ErasedSession
from tether.store._types import SessionKey
from tether.store.postgres._log import Channels

__all__ = ("erase", "erase_session")

_ERASE_ATTEMPTS: Final = 5
_ERASE: Final = """
WITH records_gone AS (
    DELETE FROM records WHERE conversation_id = %(cid)s RETURNING 1
), snapshot_gone AS (
    DELETE FROM snapshots WHERE conversation_id = %(cid)s RETURNING 1
), gates_gone AS (
    DELETE FROM gates WHERE conversation_id = %(cid)s
), refs_gone AS (
    DELETE FROM attachment_refs WHERE conversation_id = %(cid)s
), text_gone AS (
    DELETE FROM session_text WHERE conversation_id = %(cid)s
), metadata_gone AS (
    DELETE FROM session_metadata WHERE conversation_id = %(cid)s
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
Conn = AsyncConnection[TupleRow]


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
