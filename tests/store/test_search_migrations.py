"""The migrations that add session metadata and search (SQLite v25, PostgreSQL v22): the
messages of the logs written before them are backfilled into the full-text index, so an old
session is found by its words; every session starts with no metadata, and takes a patch;
and a migrated SQLite file ends with exactly the schema of a fresh one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.messages import Message
from tether.records import AssistantMessageCompleted, RecordDraft, UserMessage, format_time
from tether.store import SqliteStore
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at, sqlite_schema

_TABLES = ("conversations", "records", "submissions", "attempts")
_SQLITE_BEFORE = next(n for n, step in enumerate(_MIGRATIONS) if "session_text" in step)
_POSTGRES_BEFORE = next(n for n, step in enumerate(MIGRATIONS) if "session_text" in step)


async def _written(store: CompleteStore) -> list[str]:
    """Two conversations with messages, written before search."""
    fx = Fixtures(store)
    ids = []
    for session, said, answered in (("a", "Where is my parcel", "On its way"), ("b", "hi", "")):
        cid = (await fx.admit(session)).conversation_id
        drafts = [RecordDraft(UserMessage(body=said), time=format_time(fx.at(1)))]
        if answered:
            completed = AssistantMessageCompleted(call_id="m1", message=Message.assistant(answered))
            drafts.append(RecordDraft(completed, time=format_time(fx.at(2))))
        await store.append(cid, drafts, expected_seq=await store.head(cid), fence=0)
        ids.append(cid)
    return ids


async def _search_works(store: CompleteStore, ids: list[str]) -> None:
    found = [row.conversation_id for row in await store.list_sessions(text="parcel")]
    assert found == [ids[0]]
    assert [row.conversation_id for row in await store.list_sessions(text="its way")] == [ids[0]]
    assert {tuple(row.metadata) for row in await store.list_sessions()} == {()}
    await store.patch_session_metadata(ids[1], {"kind": "greeting"})
    listed = await store.list_sessions(metadata={"kind": "greeting"})
    assert [row.conversation_id for row in listed] == [ids[1]]


async def test_the_sqlite_search_migration_backfills_the_messages(tmp_path: Path) -> None:
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        ids = await _written(store)
    sqlite_at(_SQLITE_BEFORE, written / "tether.db", old, _TABLES)
    async with await SqliteStore.open(old) as store:
        await _search_works(store, ids)
    async with await SqliteStore.open(fresh):
        pass
    assert sqlite_schema(old / "tether.db") == sqlite_schema(fresh / "tether.db")
    assert sqlite_schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_search_migration_backfills_the_messages() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        ids = await _written(store)
    await postgres_at(_POSTGRES_BEFORE, written_schema, old, _TABLES, MIGRATIONS)
    async with await PostgresStore.open(store_url(old)) as store:
        await _search_works(store, ids)
