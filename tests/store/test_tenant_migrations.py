"""The migrations that add tenants (SQLite v16, PostgreSQL v11): every conversation, submission,
gate and schedule already stored belongs to no tenant, so an operator lists them all and a
tenant none of them, nor admits into one of them; a tenant's new session is its own; a
migrated SQLite file ends with exactly the schema of a fresh one."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import JsonValue

from tether.errors import ConversationNotFound
from tether.messages import args_digest
from tether.records import ApprovalRequested, RecordDraft
from tether.store import ScheduleRow, SqliteStore
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at, sqlite_schema

_TABLES = ("conversations", "records", "submissions", "attempts", "gates", "schedules")
_SQLITE_BEFORE = next(n for n, step in enumerate(_MIGRATIONS) if "ADD COLUMN tenant" in step)
_POSTGRES_BEFORE = next(
    n for n, step in enumerate(MIGRATIONS) if "ADD COLUMN IF NOT EXISTS tenant" in step
)


async def _written(store: CompleteStore) -> str:
    """A session with a pending gate, a claimed submission and a schedule, written before
    tenants existed; its conversation's id."""
    fx = Fixtures(store)
    submission = await fx.claim(await fx.admit("old"))
    cid = submission.conversation_id
    args: dict[str, JsonValue] = {"to": "bob"}
    requested = ApprovalRequested(
        approval_id=f"{cid}.2", call_id="c", tool="mail", args=args, args_digest=args_digest(args)
    )
    await store.append(
        cid, [RecordDraft(requested, execution_id="e")], expected_seq=1, fence=submission.fence
    )
    await store.put_schedule(ScheduleRow("sched-old", {"every": 60}, fx.at(0)))
    return cid


async def _tenants_work(store: CompleteStore, cid: str) -> None:
    assert (await store.get_conversation(cid)).tenant is None
    [row] = await store.list_sessions()
    assert (row.conversation_id, row.tenant) == (cid, None)
    assert [s.tenant for s in await store.list_submissions()] == [None]
    assert [g.tenant for g in await store.list_gates()] == [None]
    assert [s.tenant for s in await store.list_schedules()] == [None]
    assert await store.list_sessions(tenant="acme") == []
    assert await store.list_submissions(tenant="acme") == []
    assert await store.list_gates(tenant="acme") == []
    assert await store.list_schedules(tenant="acme") == []
    fx = Fixtures(store)
    with pytest.raises(ConversationNotFound):  # no tenant's: not acme's to admit into
        await fx.admit("old", tenant="acme")
    assert (await fx.admit("old")).tenant is None  # an operator's admission is admitted
    mine = await fx.admit("new", tenant="acme")
    assert [r.conversation_id for r in await store.list_sessions(tenant="acme")] == [
        mine.conversation_id
    ]


async def test_the_sqlite_tenants_migration_leaves_every_row_of_no_tenant(
    tmp_path: Path,
) -> None:
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        cid = await _written(store)
    sqlite_at(
        _SQLITE_BEFORE, written / "tether.db", old, _TABLES
    )  # the file as the step before left it
    async with await SqliteStore.open(old) as store:
        await _tenants_work(store, cid)
    async with await SqliteStore.open(fresh):
        pass
    assert sqlite_schema(old / "tether.db") == sqlite_schema(fresh / "tether.db")
    assert sqlite_schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_tenants_migration_leaves_every_row_of_no_tenant() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        cid = await _written(store)
    await postgres_at(
        _POSTGRES_BEFORE, written_schema, old, _TABLES, MIGRATIONS
    )  # the schema as the step before left it
    async with await PostgresStore.open(store_url(old)) as store:
        await _tenants_work(store, cid)
