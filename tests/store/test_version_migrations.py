"""The migrations that add agent versions (SQLite v14, PostgreSQL v9): every submission
already stored reads as unversioned, a versioned claim then stamps it, and the workers table
starts empty; a migrated SQLite file ends with exactly the schema of a fresh one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.store import SqliteStore, SubmissionStatus, VersionCount
from tether.store._sqlite_schema import SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at, sqlite_schema


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
    sqlite_at(
        13, written / "tether.db", old, ("conversations", "records", "submissions", "attempts")
    )  # the file as v13 left it
    async with await SqliteStore.open(old) as store:
        await _versions_work(store, waiting, queued)
    async with await SqliteStore.open(fresh):
        pass
    assert sqlite_schema(old / "tether.db") == sqlite_schema(fresh / "tether.db")
    assert sqlite_schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_v9_migration_leaves_every_submission_unversioned() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        waiting, queued = await _written(store)
    await postgres_at(
        8, written_schema, old, ("conversations", "records", "submissions", "attempts"), MIGRATIONS
    )  # the schema as v8 left it
    async with await PostgresStore.open(store_url(old)) as store:
        await _versions_work(store, waiting, queued)
