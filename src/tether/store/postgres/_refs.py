"""The attachments a conversation's records reference, kept beside its log on PostgreSQL.

``attachment_refs`` holds one row per conversation and digest, written in the commit of the
records that carry the reference (a ``user_message`` or ``steer_received`` with
``attachments``), a fork's copied records and an import's included: an erase drops an
attachment only when no other conversation's row names it. Records without attachments,
nearly all of them, cost nothing but a byte search of the two kinds that may carry some
(``attachment_digests``), and their statements stay as they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether.records import Record
from tether.store._common import attachment_digests

__all__ = ("INSERT_REFS", "index_refs")

Conn = AsyncConnection[TupleRow]

INSERT_REFS: Final = (
    "INSERT INTO attachment_refs (conversation_id, digest) "
    "SELECT %(cid)s, unnest(%(digests)s::text[]) {where}ON CONFLICT DO NOTHING"
)
"""The references of one conversation; ``{where}`` is an optional condition (with its
trailing space), for the statement that writes them only if it moved the head."""


async def index_refs(conn: Conn, conversation_id: str, records: Sequence[Record]) -> None:
    """Keep what ``records``, just inserted into ``conversation_id``'s log, reference, in
    the caller's transaction (nothing runs for records without attachments)."""
    digests = attachment_digests(records)
    if digests:
        await conn.execute(
            INSERT_REFS.format(where=""), {"cid": conversation_id, "digests": digests}
        )
