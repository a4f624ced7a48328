"""The migrations that add priorities (SQLite v19, PostgreSQL v16): a submission stored
before them has priority 0, and a queued one keeps its place in the backlog (its
``claim_rank`` is its admission); one admitted after, with a priority, goes ahead of them as
it would have in a fresh store; a migrated SQLite file ends with exactly the schema of a
fresh one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.store import SqliteStore
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at, sqlite_schema

_TABLES = ("conversations", "records", "submissions", "attempts")
_SQLITE_BEFORE = next(n for n, step in enumerate(_MIGRATIONS) if "claim_rank" in step)
_POSTGRES_BEFORE = next(n for n, step in enumerate(MIGRATIONS) if "claim_rank" in step)


async def _written(store: CompleteStore) -> list[str]:
    """A running submission, then two queued in other sessions, written before priorities
    (at priority 0: the columns an older version has are all that is copied)."""
    fx = Fixtures(store)
    running = await fx.claim(await fx.admit("running"))
    first = await fx.admit("first", seconds=10)
    second = await fx.admit("second", seconds=20)
    return [running.id, first.id, second.id]


async def _priorities_work(store: CompleteStore, ids: list[str]) -> None:
    fx = Fixtures(store)
    for _ in range(10):  # past the ids ``_written``'s fixtures gave
        fx.id("skip")
    old = [await store.get_submission(i) for i in ids]
    assert [s.priority for s in old] == [0, 0, 0]
    assert [s.id for s in await store.list_runnable()] == ids[1:]  # in admission order
    # Admitted at 75 s, one step (60 s) ahead: it ranks as if queued at 15 s, between the
    # one queued at 10 s and the one at 20 s.
    urgent = await fx.admit("urgent", seconds=75, priority=1)
    assert [s.id for s in await store.list_runnable()] == [ids[1], urgent.id, ids[2]]


async def test_the_sqlite_priorities_migration_keeps_the_backlogs_order(
    tmp_path: Path,
) -> None:
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        ids = await _written(store)
    sqlite_at(_SQLITE_BEFORE, written / "tether.db", old, _TABLES)
    async with await SqliteStore.open(old) as store:
        await _priorities_work(store, ids)
    async with await SqliteStore.open(fresh):
        pass
    assert sqlite_schema(old / "tether.db") == sqlite_schema(fresh / "tether.db")
    assert sqlite_schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_priorities_migration_keeps_the_backlogs_order() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        ids = await _written(store)
    await postgres_at(_POSTGRES_BEFORE, written_schema, old, _TABLES, MIGRATIONS)
    async with await PostgresStore.open(store_url(old)) as store:
        await _priorities_work(store, ids)
