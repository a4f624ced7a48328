"""The SQL of long-term memory (``MemoryItemStore``) on SQLite: one row per item, found by the
unique index on its encoded namespace and key (a prefix is a range of it), its keywords in
the FTS5 table ``memory_words`` under the item's rowid, kept in the same transaction, as
plain functions over a connection (writes on the writer's, inside its transaction)."""

from __future__ import annotations

import sqlite3
from typing import Any

from tether.store._common import from_micros, to_micros
from tether.store._memory_items import (
    MemoryHit,
    MemoryItem,
    MemoryWrite,
    Namespace,
    decode_namespace,
    encode_namespace,
    item_of,
    keywords,
    prefix_range,
    rank_by_vector,
    unpack_vector,
)

__all__ = (
    "delete_memory",
    "erase_memory",
    "get_memory",
    "list_memory",
    "memory_namespaces",
    "put_memory",
    "search_memory",
)

_T = "memory_items"
_COLUMNS = ", ".join(
    f"{_T}.{column}" for column in ("namespace", "key", "value", "text", "created_at", "updated_at")
)


def _item(row: tuple[Any, ...]) -> MemoryItem:
    namespace, key, value, text, created_at, updated_at = row[:6]
    return item_of(
        decode_namespace(namespace),
        key,
        value,
        text,
        from_micros(created_at),
        from_micros(updated_at),
    )


def _under(prefix: Namespace) -> tuple[str, tuple[str, ...]]:
    """The ``WHERE`` term selecting the namespaces under ``prefix``, and its parameters."""
    bounds = prefix_range(prefix)
    if bounds is None:
        return "1", ()
    return f"{_T}.namespace >= ? AND {_T}.namespace < ?", bounds


def put_memory(conn: sqlite3.Connection, write: MemoryWrite) -> MemoryItem:
    namespace = encode_namespace(write.namespace)
    now = to_micros(write.now)
    row = conn.execute(
        "INSERT INTO memory_items (namespace, key, value, text, embedding, created_at, "
        "updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) ON CONFLICT (namespace, key) DO UPDATE "
        "SET value = excluded.value, text = excluded.text, embedding = excluded.embedding, "
        "updated_at = excluded.updated_at RETURNING id, created_at",
        (namespace, write.key, write.value, write.text, write.embedding, now),
    ).fetchone()
    rowid, created_at = row
    conn.execute("DELETE FROM memory_words WHERE rowid = ?", (rowid,))
    conn.execute("INSERT INTO memory_words (rowid, words) VALUES (?, ?)", (rowid, write.words))
    return write.item(from_micros(created_at))


def get_memory(conn: sqlite3.Connection, namespace: Namespace, key: str) -> MemoryItem | None:
    found = conn.execute(
        f"SELECT {_COLUMNS} FROM memory_items WHERE namespace = ? AND key = ?",
        (encode_namespace(namespace), key),
    ).fetchone()
    return None if found is None else _item(found)


def delete_memory(conn: sqlite3.Connection, namespace: Namespace, key: str) -> bool:
    found = conn.execute(
        "DELETE FROM memory_items WHERE namespace = ? AND key = ? RETURNING id",
        (encode_namespace(namespace), key),
    ).fetchone()
    if found is None:
        return False
    conn.execute("DELETE FROM memory_words WHERE rowid = ?", (found[0],))
    return True


def list_memory(
    conn: sqlite3.Connection, prefix: Namespace, limit: int, offset: int
) -> list[MemoryItem]:
    where, bounds = _under(prefix)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM memory_items WHERE {where} "
        "ORDER BY namespace, key LIMIT ? OFFSET ?",
        (*bounds, limit, offset),
    ).fetchall()
    return [_item(row) for row in rows]


def memory_namespaces(
    conn: sqlite3.Connection, prefix: Namespace, limit: int, offset: int
) -> list[Namespace]:
    where, bounds = _under(prefix)
    rows = conn.execute(
        f"SELECT DISTINCT namespace FROM memory_items WHERE {where} "
        "ORDER BY namespace LIMIT ? OFFSET ?",
        (*bounds, limit, offset),
    ).fetchall()
    return [decode_namespace(namespace) for (namespace,) in rows]


def search_memory(
    conn: sqlite3.Connection,
    prefix: Namespace,
    text: str | None,
    vector: tuple[float, ...] | None,
    limit: int,
    offset: int,
    scan: int,
) -> list[MemoryHit]:
    where, bounds = _under(prefix)
    words = keywords(text or "")
    params: list[object] = list(bounds)
    source = "memory_items"
    if words:
        # Each keyword quoted: an FTS5 phrase of one word, all of them required.
        source += (
            " JOIN memory_words ON memory_words.rowid = memory_items.id AND memory_words MATCH ?"
        )
        params.insert(0, " ".join(f'"{word}"' for word in words))
    order = "ORDER BY memory_items.updated_at DESC, memory_items.namespace, memory_items.key "
    order += "LIMIT ? OFFSET ?"
    if vector is None:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM {source} WHERE {where} {order}",
            (*params, limit, offset),
        ).fetchall()
        return [MemoryHit(_item(row)) for row in rows]
    rows = conn.execute(
        f"SELECT {_COLUMNS}, memory_items.embedding FROM {source} "
        f"WHERE {where} AND memory_items.embedding IS NOT NULL {order}",
        (*params, scan, 0),
    ).fetchall()
    return rank_by_vector(
        [(_item(row), unpack_vector(row[6])) for row in rows], vector, limit, offset
    )


def erase_memory(conn: sqlite3.Connection, prefix: Namespace, before: int | None) -> int:
    where, bounds = _under(prefix)
    erased = conn.execute(
        # ?1 first: the unnumbered parameters of ``where`` then number from 2.
        f"DELETE FROM memory_items WHERE (?1 IS NULL OR updated_at < ?1) AND {where} RETURNING id",
        (before, *bounds),
    ).fetchall()
    conn.executemany("DELETE FROM memory_words WHERE rowid = ?", erased)
    return len(erased)
