"""Where the PostgreSQL tests run: ``TETHER_TEST_POSTGRES_URL``, or the local server.

Each test gets a schema of its own, dropped when the session ends, so runs never see each
other's data. CI gives every run a database of its own and drops it whole at the end
(``TETHER_TEST_POSTGRES_DISPOSABLE=1``): its schemas are left to that one drop.

A test that asks for a store (the ``store`` fixture, the conformance suite) gets one from
:func:`open_pooled`: a schema migrated once in this process and emptied after each test that
used it, not a new one migrated for each (migrating one costs the server about a tenth of a
second, and a thousand tests ask). A schema is handed out again only if it is, catalogue
and all, what its migration made (:func:`_emptied`); one a test changed is left for the
session's drop. A test about migrations, or that names its schema, uses
:func:`fresh_schema` as before.
"""

from __future__ import annotations

import os
import uuid

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from tether.store.postgres import SCHEMA_VERSION, PostgresStore

__all__ = (
    "POSTGRES_URL",
    "PooledStore",
    "drop_schemas",
    "fresh_schema",
    "open_pooled",
    "postgres_reachable",
    "store_url",
)

POSTGRES_URL = os.environ.get(
    "TETHER_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
_created: list[str] = []
_idle: list[str] = []
"""Schemas of this process, migrated and empty, for the next test that asks for a store."""
_leased: set[str] = set()
"""Pooled schemas a store is open on: each goes back once, when that store closes."""


def fresh_schema() -> str:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    _created.append(schema)
    return schema


def store_url(schema: str, **options: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"schema": schema, **options}.items())
    separator = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{separator}{query}"


def postgres_reachable() -> bool:
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=10):
            return True
    except psycopg.Error:
        return False


def drop_schemas() -> None:
    _close_connection()
    if os.environ.get("TETHER_TEST_POSTGRES_DISPOSABLE"):
        _created.clear()
        return
    _idle.clear()  # about to be dropped
    _migrated.clear()
    if not _created or not postgres_reachable():
        return
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for schema in _created:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    _created.clear()


class PooledStore(PostgresStore):
    """A :class:`PostgresStore` on a pooled schema, which it gives back when it closes."""

    async def close(self) -> None:
        await super().close()
        if self.schema in _leased:
            _leased.discard(self.schema)
            _idle.append(self.schema)


async def open_pooled(**options: str) -> PostgresStore:
    """A store on an empty, fully migrated schema of its own until it closes: one from the
    pool (emptied now, when whatever the last test started has been reaped), or a new one
    (migrated as it opens, then pooled in its turn)."""
    global _tables
    schema = None
    while _idle and schema is None:
        candidate = _idle.pop()
        schema = candidate if _emptied(candidate) else None
    schema = schema or fresh_schema()
    store = await PooledStore.open(store_url(schema, **options))
    if schema not in _migrated:  # just migrated: what it must be again to be pooled again
        conn = _connection()
        _migrated[schema] = _digest(conn, schema)
        if _tables is None:
            _tables = _emptying_order(conn, schema)
    _leased.add(schema)
    return store


_migrated: dict[str, str] = {}
"""Each pooled schema's catalogue digest as its migration left it."""
_tables: tuple[str, ...] | None = None
"""The tables of a migrated schema (but ``tether_schema``), each before those it references."""
_conn: psycopg.Connection[TupleRow] | None = None


def _connection() -> psycopg.Connection[TupleRow]:
    global _conn
    if _conn is None or _conn.closed:
        _conn = psycopg.connect(POSTGRES_URL, autocommit=True)
    return _conn


def _close_connection() -> None:
    global _conn
    if _conn is not None:
        _conn.close()
        _conn = None


# The schema's catalogue, one line an object (the schema's name replaced by "~"): relations;
# columns with their type, nullability, identity and default; indexes with their columns,
# operator classes, expressions and predicate; constraints with their columns, the table
# they reference and their check; functions with their arguments, settings and body;
# triggers; sequences. Raw catalogue columns, not pg_get_*def(): a fifth of the cost.
_CATALOGUE = """
WITH cls AS (
    SELECT oid, relname, relkind FROM pg_class WHERE relnamespace = %(schema)s::text::regnamespace
),
items(item) AS (
    SELECT format('rel %%s %%s', relname, relkind) FROM cls
  UNION ALL
    SELECT format('col %%s %%s %%s %%s %%s %%s %%s %%s', c.relname, a.attnum, a.attname,
                  a.atttypid, a.atttypmod, a.attnotnull, a.attidentity, d.adbin)
    FROM pg_attribute a JOIN cls c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
    SELECT format('idx %%s %%s %%s %%s %%s %%s %%s', c.relname, t.relname, i.indisunique,
                  i.indkey, i.indclass, i.indexprs, i.indpred)
    FROM pg_index i JOIN cls c ON c.oid = i.indexrelid JOIN cls t ON t.oid = i.indrelid
  UNION ALL
    SELECT format('con %%s %%s %%s %%s %%s %%s %%s', t.relname, k.conname, k.contype, k.conkey,
                  f.relname, k.confkey, k.conbin)
    FROM pg_constraint k JOIN cls t ON t.oid = k.conrelid LEFT JOIN cls f ON f.oid = k.confrelid
  UNION ALL
    SELECT format('fn %%s %%s %%s %%s', proname, proargtypes, proconfig, prosrc)
    FROM pg_proc WHERE pronamespace = %(schema)s::text::regnamespace
  UNION ALL
    SELECT format('trg %%s %%s %%s %%s', c.relname, t.tgname, t.tgfoid, t.tgtype)
    FROM pg_trigger t JOIN cls c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal
  UNION ALL
    SELECT format('seq %%s %%s %%s %%s', c.relname, s.seqstart, s.seqincrement, s.seqcycle)
    FROM pg_sequence s JOIN cls c ON c.oid = s.seqrelid
)
SELECT md5(coalesce(string_agg(replace(item, %(schema)s::text, '~'), E'\\n' ORDER BY item), ''))
FROM items
"""


def _digest(conn: psycopg.Connection[TupleRow], schema: str) -> str:
    row = conn.execute(_CATALOGUE, {"schema": schema}).fetchone()
    assert row is not None
    return str(row[0])


def _emptying_order(conn: psycopg.Connection[TupleRow], schema: str) -> tuple[str, ...]:
    """The tables of ``schema`` but ``tether_schema``, each before the tables it references."""
    tables = [
        str(name)
        for (name,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename <> 'tether_schema'"
            " ORDER BY tablename",
            (schema,),
        ).fetchall()
    ]
    references = conn.execute(
        "SELECT k.relname, p.relname FROM pg_constraint c"
        " JOIN pg_class k ON k.oid = c.conrelid JOIN pg_class p ON p.oid = c.confrelid"
        " WHERE c.contype = 'f' AND c.connamespace = %s::text::regnamespace",
        (schema,),
    ).fetchall()
    referencing: dict[str, set[str]] = {table: set() for table in tables}
    for child, parent in references:
        referencing[str(parent)].add(str(child))
    order: list[str] = []
    while len(order) < len(tables):
        ready = [t for t in tables if t not in order and referencing[t] <= set(order)]
        assert ready, f"a cycle of foreign keys: {referencing}"
        order.extend(ready)
    return tuple(order)


def _emptied(schema: str) -> bool:
    """Empty ``schema`` if it still is what its migration made: the same catalogue, at the
    current version. Its tables are locked first, which waits out (up to two seconds) any
    transaction still on them: a process the last test started and left running has been
    reaped since, but what its session had in flight may still be committing. ``False``
    (the schema left for the session's drop) if not."""
    if _tables is None or schema not in _migrated:
        return False
    ident = sql.Identifier(schema)
    tables = sql.SQL(", ").join(sql.Identifier(schema, table) for table in _tables)
    try:
        conn = _connection()
        with conn.transaction():
            conn.execute("SET LOCAL lock_timeout = '2s'")
            conn.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(tables))
            if _digest(conn, schema) != _migrated[schema]:
                return False
            version = conn.execute(
                sql.SQL("SELECT version FROM {}.tether_schema").format(ident)
            ).fetchall()
            if version != [(SCHEMA_VERSION,)]:
                return False
            for table in _tables:
                conn.execute(sql.SQL("DELETE FROM {}.{}").format(ident, sql.Identifier(table)))
            conn.execute(
                "SELECT setval(s.seqrelid, s.seqstart, false) FROM pg_sequence s"
                " JOIN pg_class c ON c.oid = s.seqrelid"
                " WHERE c.relnamespace = %s::text::regnamespace",
                (schema,),
            )
    except psycopg.Error:
        _close_connection()
        return False
    return True
