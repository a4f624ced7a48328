"""The migrations that add tenant usage (SQLite v21, PostgreSQL v18): a store written before
them opens with an empty aggregate (nothing is backfilled), a tenant's conversation stored
before them spends into it from its next append on, and a migrated SQLite file ends with
exactly the schema of a fresh one."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tether.messages import Message, Usage
from tether.records import AssistantMessageCompleted, RecordDraft, format_time
from tether.store import SqliteStore, UsageSpent
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at, sqlite_schema

_TABLES = ("conversations", "records", "submissions", "attempts")
_SQLITE_BEFORE = next(n for n, step in enumerate(_MIGRATIONS) if "tenant_usage" in step)
_POSTGRES_BEFORE = next(n for n, step in enumerate(MIGRATIONS) if "tenant_usage" in step)
DAY, NEXT = date(2026, 1, 1), date(2026, 1, 2)


async def _written(store: CompleteStore) -> str:
    """A tenant's conversation, written before tenant usage."""
    return (await Fixtures(store).admit("s", tenant="acme")).conversation_id


async def _usage_works(store: CompleteStore, conversation_id: str) -> None:
    assert await store.tenant_usage("acme", start=DAY, end=NEXT) == UsageSpent()
    completed = AssistantMessageCompleted(
        call_id="m1", message=Message.assistant("ok"), usage=Usage(input_tokens=7), cost=0.5
    )
    draft = RecordDraft(completed, id="rec-usage", time=format_time(Fixtures.at(0)))
    head = await store.head(conversation_id)
    await store.append(conversation_id, [draft], expected_seq=head, fence=0)
    spent = await store.tenant_usage("acme", start=DAY, end=NEXT)
    assert (spent.model_calls, spent.tokens, spent.cost_usd) == (1, 7, 0.5)


async def test_the_sqlite_usage_migration_starts_an_empty_aggregate(tmp_path: Path) -> None:
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        conversation_id = await _written(store)
    sqlite_at(_SQLITE_BEFORE, written / "tether.db", old, _TABLES)
    async with await SqliteStore.open(old) as store:
        await _usage_works(store, conversation_id)
    async with await SqliteStore.open(fresh):
        pass
    assert sqlite_schema(old / "tether.db") == sqlite_schema(fresh / "tether.db")
    assert sqlite_schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_usage_migration_starts_an_empty_aggregate() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        conversation_id = await _written(store)
    await postgres_at(_POSTGRES_BEFORE, written_schema, old, _TABLES, MIGRATIONS)
    async with await PostgresStore.open(store_url(old)) as store:
        await _usage_works(store, conversation_id)
