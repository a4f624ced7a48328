"""The migrations that add agent versions (SQLite v14, PostgreSQL v9): every submission
already stored reads as unversioned, a versioned claim then stamps it, and the workers table
starts empty; a migrated SQLite file ends with exactly the schema of a fresh one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tether.store import SqliteStore, SubmissionStatus, VersionCount
from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import POSTGRES_URL, fresh_schema, store_url


def _schema(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    return [*rows, ("user_version", str(version))]


async def _written(store: CompleteStore) -> tuple[str, str]:
    """A queued submission and a waiting one, written before versions existed."""
    fx = Fixtures(store)
    waiting = await fx.claim(await fx.admit("waiting"))
    await store.park(waiting.id, attempt_id=str(waiting.attempt_id), reason="approval")
    return waiting.id, (await fx.admit("queued")).id


async def _versions_work(store: CompleteStore, waiting: str, queued: str) -> None:
    for sid in (waiting, queued):
        assert (await store.get_submission(sid)).version is None
    assert await store.version_counts() == [
        VersionCount("support", None, "queued", None, 1),
        VersionCount("support", None, "waiting", "approval", 1),
    ]
    assert await store.list_workers() == []
    fx = Fixtures(store)
    claimed = await fx.claim(await store.get_submission(queued), serves={"support": ["v1"]})
    assert (claimed.status, claimed.version) == (SubmissionStatus.RUNNING, "v1")
    moved = await store.set_version(waiting, expected=None, version="v1")
    assert (moved.status, moved.version) == (SubmissionStatus.WAITING, "v1")
    await store.put_worker("w", {"support": ["v1"]}, now=fx.at(0))
    assert [w.owner_id for w in await store.list_workers()] == ["w"]


async def test_the_sqlite_v14_migration_leaves_every_submission_unversioned(
    tmp_path: Path,
) -> None:
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        waiting, queued = await _written(store)
    old.mkdir()
    with sqlite3.connect(old / "tether.db") as conn:  # the file as v13 left it
        conn.create_function("tether_unhex", 1, bytes.fromhex)
        conn.create_function("tether_kind_code", 1, kind_code)
        for step in _MIGRATIONS[:13]:
            conn.executescript(step)
        conn.execute("PRAGMA user_version = 13")
        conn.execute("ATTACH DATABASE ? AS written", (str(written / "tether.db"),))
        for table in ("conversations", "records", "submissions", "attempts"):  # v13's columns
            columns = ", ".join(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
            conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM written.{table}")
        conn.commit()
        conn.execute("DETACH DATABASE written")
    conn.close()
    async with await SqliteStore.open(old) as store:
        await _versions_work(store, waiting, queued)
    async with await SqliteStore.open(fresh):
        pass
    assert _schema(old / "tether.db") == _schema(fresh / "tether.db")
    assert _schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_v9_migration_leaves_every_submission_unversioned() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        waiting, queued = await _written(store)
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(old)))
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(old)))
        for step in MIGRATIONS[:8]:  # the schema as v8 left it
            await conn.execute(step)
        await conn.execute("UPDATE tether_schema SET version = 8")
        for table in ("conversations", "records", "submissions", "attempts"):  # v8's columns
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
                    sql.Identifier(written_schema),
                    sql.Identifier(table),
                )
            )
    async with await PostgresStore.open(store_url(old)) as store:
        await _versions_work(store, waiting, queued)
