"""A store as an earlier schema version left it, holding what a store of today wrote (the
columns that version had): what a migration test opens, to see the steps after it take the
rows in."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import psycopg
from psycopg import sql

from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_schema import _MIGRATIONS

from ..postgres import POSTGRES_URL

__all__ = ("postgres_at", "sqlite_at", "sqlite_schema")


def sqlite_at(version: int, written: Path, old: Path, tables: Sequence[str]) -> None:
    """Make ``old/tether.db`` a SQLite file as ``version`` left it, holding the rows of
    ``tables`` of the file ``written`` (in the columns ``version`` has)."""
    old.mkdir(exist_ok=True)
    with sqlite3.connect(old / "tether.db") as conn:
        conn.create_function("tether_unhex", 1, bytes.fromhex)
        conn.create_function("tether_kind_code", 1, kind_code)
        for step in _MIGRATIONS[:version]:
            conn.executescript(step)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("ATTACH DATABASE ? AS written", (str(written),))
        for table in tables:
            columns = ", ".join(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
            conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM written.{table}")
        conn.commit()
        conn.execute("DETACH DATABASE written")
    conn.close()


def sqlite_schema(path: Path) -> list[tuple[str, str]]:
    """Every table and index of a SQLite file, with its ``user_version``: a migrated file
    must end with exactly a fresh one's."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    return [*rows, ("user_version", str(version))]


async def postgres_at(
    version: int, written: str, old: str, tables: Sequence[str], migrations: Sequence[str]
) -> None:
    """Make the PostgreSQL schema ``old`` as ``version`` of ``migrations`` left it, holding
    the rows of ``tables`` of the schema ``written`` (in the columns ``version`` has)."""
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(old)))
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(old)))
        for step in migrations[:version]:
            await conn.execute(step)
        await conn.execute("UPDATE tether_schema SET version = %s", (version,))
        for table in tables:
            rows = await conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = %s AND is_generated = 'NEVER' "
                "AND is_identity = 'NO'",
                (old, table),
            )
            columns = sql.SQL(", ").join(sql.Identifier(row[0]) for row in await rows.fetchall())
            await conn.execute(
                sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}.{}").format(
                    sql.Identifier(table),
                    columns,
                    columns,
                    sql.Identifier(written),
                    sql.Identifier(table),
                )
            )
