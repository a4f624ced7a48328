"""Importing an exported log on PostgreSQL (``ImportStore.import_conversation``): checked as
it streams in, written in one transaction.

An import writes the conversation row, then its records in batches as they are checked
(``ImportCheck``: the chain, the record its own log begins with), the gates of its own records
(a fork's copied ones stay its parent's) and what they reference, then the row's anchor, in
one transaction: a log streamed from a file is never held whole, and a record that fails
rolls it all back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether.errors import SessionExists
from tether.records import Record
from tether.store._common import record_time
from tether.store._import import ImportCheck
from tether.store._types import Conversation
from tether.store.postgres._gates import index_gates
from tether.store.postgres._log import Channels, insert_conversation, insert_records, notify
from tether.store.postgres._refs import index_refs
from tether.store.postgres._text import index_text

__all__ = ("import_conversation",)

Conn = AsyncConnection[TupleRow]


async def import_conversation(
    conn: Conn,
    conversation: Conversation,
    records: Iterable[Record],
    channels: Channels,
    tenant: str | None = None,
) -> bool:
    """Create ``conversation`` holding exactly ``records``, each checked as it comes
    (:class:`ImportCheck`) and written in batches, in the caller's transaction (a record
    that fails rolls it all back); ``False`` if the store holds that very log already."""
    conversation = dataclasses.replace(conversation, tenant=tenant)
    check = ImportCheck(conversation)
    if not await insert_conversation(conn, conversation, None):
        # Its id or its session key is taken: by this log (the head hash seals all of it,
        # the key and the parent included), or by another. The whole log is checked first.
        for _ in check.batches(records):
            pass
        last = check.finish()
        held = await (
            await conn.execute(
                "SELECT head, head_hash, tenant FROM conversations WHERE id = %s",
                (conversation.id,),
            )
        ).fetchone()
        if held is not None and (int(held[0]), bytes(held[1]).hex(), held[2]) == (
            last.seq,
            last.hash,
            tenant,
        ):
            return False
        raise SessionExists(str(conversation.key))
    for batch in check.batches(records):
        await insert_records(conn, conversation.id, batch)
        # Its own records' gates (a fork's copied ones are its parent's); a truncated log's
        # records start at its anchor, so they are told apart by seq, not by position.
        await index_gates(conn, conversation.id, [r for r in batch if r.seq >= check.start])
        await index_refs(conn, conversation.id, batch)
        await index_text(conn, conversation.id, batch)
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
