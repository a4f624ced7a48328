"""The SQL of long-term memory (``MemoryItemStore``) on PostgreSQL: one row per item, keyed
by its encoded namespace and key (``COLLATE "C"``, so a prefix is a range of the primary
key and the order is by code point), its keywords a ``tsvector`` built from exactly the
words :func:`~tether.store._memory_items.keywords` found (``array_to_tsvector``: no parser
of PostgreSQL's own), under a GIN index; each operation one statement."""

from __future__ import annotations

from datetime import datetime
from typing import Any

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
from tether.store._tokens import stored_time
from tether.store.postgres._log import Conn

__all__ = (
    "delete_memory",
    "erase_memory",
    "get_memory",
    "list_memory",
    "memory_namespaces",
    "put_memory",
    "search_memory",
)

_COLUMNS = "namespace, key, value, text, created_at, updated_at"


def _item(row: tuple[Any, ...]) -> MemoryItem:
    namespace, key, value, text, created_at, updated_at = row[:6]
    return item_of(
        decode_namespace(namespace),
        key,
        bytes(value),
        text,
        stored_time(created_at),
        stored_time(updated_at),
    )


def _under(prefix: Namespace) -> tuple[str, dict[str, str]]:
    """The ``WHERE`` term selecting the namespaces under ``prefix``, and its parameters."""
    bounds = prefix_range(prefix)
    if bounds is None:
        return "TRUE", {}
    low, high = bounds
    return "namespace >= %(low)s AND namespace < %(high)s", {"low": low, "high": high}


async def put_memory(conn: Conn, write: MemoryWrite) -> MemoryItem:
    row = await (
        await conn.execute(
            "INSERT INTO memory_items (namespace, key, value, text, words, embedding, "
            "created_at, updated_at) VALUES (%(namespace)s, %(key)s, %(value)s, %(text)s, "
            "array_to_tsvector(%(words)s::text[]), %(embedding)s, %(now)s, %(now)s) "
            "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, "
            "text = excluded.text, words = excluded.words, embedding = excluded.embedding, "
            "updated_at = excluded.updated_at RETURNING created_at",
            {
                "namespace": encode_namespace(write.namespace),
                "key": write.key,
                "value": write.value,
                "text": write.text,
                "words": write.words.split(),
                "embedding": write.embedding,
                "now": write.now,
            },
        )
    ).fetchone()
    assert row is not None
    return write.item(stored_time(row[0]))


async def get_memory(conn: Conn, namespace: Namespace, key: str) -> MemoryItem | None:
    found = await (
        await conn.execute(
            f"SELECT {_COLUMNS} FROM memory_items WHERE namespace = %s AND key = %s",
            (encode_namespace(namespace), key),
        )
    ).fetchone()
    return None if found is None else _item(found)


async def delete_memory(conn: Conn, namespace: Namespace, key: str) -> bool:
    deleted = await conn.execute(
        "DELETE FROM memory_items WHERE namespace = %s AND key = %s",
        (encode_namespace(namespace), key),
    )
    return deleted.rowcount > 0


async def list_memory(conn: Conn, prefix: Namespace, limit: int, offset: int) -> list[MemoryItem]:
    where, params = _under(prefix)
    rows = await (
        await conn.execute(
            f"SELECT {_COLUMNS} FROM memory_items WHERE {where} "
            "ORDER BY namespace, key LIMIT %(limit)s OFFSET %(offset)s",
            {**params, "limit": limit, "offset": offset},
        )
    ).fetchall()
    return [_item(row) for row in rows]


async def memory_namespaces(
    conn: Conn, prefix: Namespace, limit: int, offset: int
) -> list[Namespace]:
    where, params = _under(prefix)
    rows = await (
        await conn.execute(
            f"SELECT DISTINCT namespace FROM memory_items WHERE {where} "
            "ORDER BY namespace LIMIT %(limit)s OFFSET %(offset)s",
            {**params, "limit": limit, "offset": offset},
        )
    ).fetchall()
    return [decode_namespace(namespace) for (namespace,) in rows]


async def search_memory(
    conn: Conn,
    prefix: Namespace,
    text: str | None,
    vector: tuple[float, ...] | None,
    limit: int,
    offset: int,
    scan: int,
) -> list[MemoryHit]:
    where, params = _under(prefix)
    words = keywords(text or "")
    conditions = [where]
    if words:
        # Each keyword a quoted lexeme (no normalization), all of them required.
        conditions.append("words @@ %(query)s::tsquery")
        params = {**params, "query": " & ".join(f"'{word}'" for word in words)}
    order = "ORDER BY updated_at DESC, namespace, key LIMIT %(limit)s OFFSET %(offset)s"
    if vector is None:
        rows = await (
            await conn.execute(
                f"SELECT {_COLUMNS} FROM memory_items WHERE {' AND '.join(conditions)} {order}",
                {**params, "limit": limit, "offset": offset},
            )
        ).fetchall()
        return [MemoryHit(_item(row)) for row in rows]
    conditions.append("embedding IS NOT NULL")
    rows = await (
        await conn.execute(
            f"SELECT {_COLUMNS}, embedding FROM memory_items "
            f"WHERE {' AND '.join(conditions)} {order}",
            {**params, "limit": scan, "offset": 0},
        )
    ).fetchall()
    candidates = [(_item(row), unpack_vector(bytes(row[6]))) for row in rows]
    return rank_by_vector(candidates, vector, limit, offset)


async def erase_memory(conn: Conn, prefix: Namespace, before: datetime | None) -> int:
    where, params = _under(prefix)
    erased = await conn.execute(
        f"DELETE FROM memory_items WHERE {where} "
        "AND (%(before)s::timestamptz IS NULL OR updated_at < %(before)s)",
        {**params, "before": before},
    )
    return erased.rowcount
