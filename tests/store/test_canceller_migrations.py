"""The migrations that keep who asked for each cancel (SQLite v18, PostgreSQL v13): a
submission cancelled before them was cancelled by no verified identity
(``cancel_requested_by`` is ``None``, its stamp as it was); a cancel asked after records who;
a migrated SQLite file ends with exactly the schema of a fresh one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.records import Actor
from tether.store import SqliteStore
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at, sqlite_schema

_TABLES = ("conversations", "records", "submissions", "attempts")
_SQLITE_BEFORE = next(n for n, step in enumerate(_MIGRATIONS) if "cancel_requested_by" in step)
_POSTGRES_BEFORE = next(n for n, step in enumerate(MIGRATIONS) if "cancel_requested_by" in step)
_ANN = Actor(subject="ann@acme", tenant="acme", display="Ann")


async def _written(store: CompleteStore) -> tuple[str, str]:
    """A submission cancelled and one queued, written before cancels kept who asked."""
    fx = Fixtures(store)
    cancelled = await fx.admit("old")
    await store.request_cancel(cancelled.id, now=fx.at(1))
    queued = await fx.admit("new")
    return cancelled.id, queued.id


async def _cancellers_work(store: CompleteStore, cancelled: str, queued: str) -> None:
    old = await store.get_submission(cancelled)
    assert old.cancel_requested_at is not None and old.cancel_requested_by is None
    asked = await store.request_cancel(queued, now=old.cancel_requested_at, by=_ANN)
    assert asked.cancel_requested_by == _ANN
    assert (await store.get_submission(queued)).cancel_requested_by == _ANN


async def test_the_sqlite_cancellers_migration_leaves_every_cancel_by_no_one(
    tmp_path: Path,
) -> None:
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        ids = await _written(store)
    sqlite_at(_SQLITE_BEFORE, written / "tether.db", old, _TABLES)
    async with await SqliteStore.open(old) as store:
        await _cancellers_work(store, *ids)
    async with await SqliteStore.open(fresh):
        pass
    assert sqlite_schema(old / "tether.db") == sqlite_schema(fresh / "tether.db")
    assert sqlite_schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_cancellers_migration_leaves_every_cancel_by_no_one() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        ids = await _written(store)
    await postgres_at(_POSTGRES_BEFORE, written_schema, old, _TABLES, MIGRATIONS)
    async with await PostgresStore.open(store_url(old)) as store:
        await _cancellers_work(store, *ids)
