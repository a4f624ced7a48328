"""The full text of messages on SQLite: the FTS5 table ``session_text`` that session search
reads (``SessionListStore.list_sessions``' ``text``), fed in the transaction of every
append, emptied of a conversation by its erase, and backfilled by the migration that made it.

A row is one message's words (``tether.store._search_text``: split as every backend splits
them, joined by spaces) at the rowid ``number << 32 | seq``: a conversation's rows are one
rowid range, so an erase deletes them by range and a match names its conversation by a
shift, without a column to scan.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Final

from tether.records import Record
from tether.store._search_text import SEARCHED_KINDS, searchable, words
from tether.store._sqlite_kinds import kind_code, kind_name

__all__ = ("SEQ_BITS", "backfill_text", "forget_text", "index_text", "match_expression")

SEQ_BITS: Final = 32
"""A row's rowid is its conversation's number shifted by this, plus its seq."""
_SEQ_MASK: Final = (1 << SEQ_BITS) - 1


def _rows(number: int, records: Iterable[Record]) -> list[tuple[int, str]]:
    return [
        ((number << SEQ_BITS) | (seq & _SEQ_MASK), joined)
        for seq, text in searchable(records)
        if (joined := " ".join(words(text)))
    ]


def index_text(conn: sqlite3.Connection, number: int, records: Sequence[Record]) -> None:
    """Keep the words of the messages among ``records`` (just written to conversation
    ``number``), in the caller's transaction; a batch without a message runs no statement."""
    rows = _rows(number, records)
    if rows:
        conn.executemany("INSERT INTO session_text (rowid, text) VALUES (?, ?)", rows)


def forget_text(conn: sqlite3.Connection, number: int) -> None:
    """Remove conversation ``number``'s messages from the index (its rowid range)."""
    conn.execute(
        "DELETE FROM session_text WHERE rowid BETWEEN ? AND ?",
        (number << SEQ_BITS, (number << SEQ_BITS) | _SEQ_MASK),
    )


def match_expression(query: Sequence[str]) -> str:
    """The FTS5 query of every word of ``query`` (words hold only letters and digits)."""
    return " ".join(f'"{word}"' for word in query)


_CODES: Final = tuple(kind_code(kind) for kind in sorted(SEARCHED_KINDS))


def backfill_text(conn: sqlite3.Connection) -> None:
    """Index the messages of the logs written before the index existed."""
    marks = ", ".join("?" * len(_CODES))
    cursor = conn.execute(
        f"SELECT conversation, seq, kind, body FROM records WHERE kind IN ({marks})", _CODES
    )
    while batch := cursor.fetchmany(1000):
        rows: list[tuple[int, str]] = []
        for number, seq, kind, body in batch:
            rows += _rows(number, [Record(seq, kind_name(kind), bytes(body), "", "")])
        if rows:
            conn.executemany("INSERT INTO session_text (rowid, text) VALUES (?, ?)", rows)
