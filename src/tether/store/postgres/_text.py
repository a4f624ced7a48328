"""The full text of messages on PostgreSQL: ``session_text``, one row per message (its
conversation, its seq, its words as a ``tsvector``) under a GIN index, which session search
reads (``SessionListStore.list_sessions``' ``text``); fed in the transaction of every
append (the one-statement append writes it in its own statement), emptied of a conversation
by its erase, and backfilled by the migration that made it.

The words are split as every backend splits them (``tether.store._search_text``) and made
a ``tsvector`` as they are (``array_to_tsvector``: no parser, no dictionary), and a query is
the ``tsquery`` of its words, each quoted: the same matches as SQLite's and the reference's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether.records import Record
from tether.store._search_text import SEARCHED_KINDS, searchable, words

__all__ = ("INSERT_TEXT", "backfill_text", "index_text", "text_rows", "tsquery")

Conn = AsyncConnection[TupleRow]

INSERT_TEXT: Final = (
    "INSERT INTO session_text (conversation_id, seq, document) "
    "SELECT %(cid)s, t.seq, array_to_tsvector(string_to_array(t.words, ' ')) "
    "FROM unnest(%(text_seqs)s::bigint[], %(texts)s::text[]) AS t(seq, words) {where}"
)
"""The words of one conversation's messages; ``{where}`` is an optional condition (with its
trailing space), for the statement that writes them only if it moved the head."""


def text_rows(records: Iterable[Record]) -> tuple[list[int], list[str]]:
    """The seqs and the space-joined words of the messages among ``records``."""
    seqs: list[int] = []
    texts: list[str] = []
    for seq, text in searchable(records):
        joined = " ".join(words(text))
        if joined:
            seqs.append(seq)
            texts.append(joined)
    return seqs, texts


async def index_text(
    conn: Conn, conversation_id: str, records: Sequence[Record], *, again: bool = False
) -> None:
    """Keep the words of the messages among ``records`` (just written to the conversation's
    log), in the caller's transaction; nothing runs for records without one. ``again``: some
    may be kept already (a backfill run again), and stay as they are."""
    seqs, texts = text_rows(records)
    if seqs:
        await conn.execute(
            INSERT_TEXT.format(where="") + (" ON CONFLICT DO NOTHING" if again else ""),
            {"cid": conversation_id, "text_seqs": seqs, "texts": texts},
        )


def tsquery(query: Sequence[str]) -> str:
    """The ``tsquery`` of every word of ``query`` (words hold only letters and digits)."""
    return " & ".join(f"'{word}'" for word in query)


async def backfill_text(conn: Conn) -> None:
    """Index the messages of the logs written before the index existed, a batch of records
    at a time. Idempotent: a message already kept stays as it is."""
    async with conn.cursor(name="tether_text_backfill") as cursor:
        await cursor.execute(
            "SELECT conversation_id, seq, kind, body FROM records WHERE kind = ANY(%s)",
            (sorted(SEARCHED_KINDS),),
        )
        while rows := await cursor.fetchmany(1000):
            batch: dict[str, list[Record]] = {}
            for cid, seq, kind, body in rows:
                batch.setdefault(cid, []).append(Record(int(seq), kind, bytes(body), "", ""))
            for cid, records in batch.items():
                await index_text(conn, cid, records, again=True)
