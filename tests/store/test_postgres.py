import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tether.errors import Conflict, Fenced, StoreUnavailable, UnsupportedSchema
from tether.records import RecordDraft, UserMessage
from tether.store import NewSubmission, SessionKey, Store, StoreCapabilities
from tether.store.postgres import SCHEMA_VERSION, PostgresStore
from tether.store.postgres import _schema as schema_module
from tether.store.postgres._schema import BACKFILLS, MIGRATIONS
from tether.testing.storetest import StoreConformance

from ..postgres import POSTGRES_URL, fresh_schema, open_pooled, store_url

pytestmark = pytest.mark.postgres


class TestPostgresStore(StoreConformance):
    async def make_store(self, directory: Path) -> Store:
        return await open_pooled()

    async def tamper(self, store: Store, conversation_id: str, seq: int, body: bytes) -> None:
        assert isinstance(store, PostgresStore)
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
            await conn.execute(
                sql.SQL(
                    "UPDATE {}.records SET body = %s WHERE conversation_id = %s AND seq = %s"
                ).format(sql.Identifier(store.schema)),
                (body, conversation_id, seq),
            )

    async def truncate(self, store: Store, conversation_id: str, seq: int) -> None:
        assert isinstance(store, PostgresStore)
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DELETE FROM {}.records WHERE conversation_id = %s AND seq > %s").format(
                    sql.Identifier(store.schema)
                ),
                (conversation_id, seq),
            )


async def test_it_offers_every_capability() -> None:
    store = await PostgresStore.open(store_url(fresh_schema()))
    try:
        assert StoreCapabilities.of(store).missing == ()
    finally:
        await store.close()


async def test_two_stores_on_one_schema_keep_one_chain() -> None:
    """Each store remembers the head it last wrote; a write by another process must neither be
    overwritten nor forked from: a stale belief falls back to the checked path."""
    url = store_url(fresh_schema())
    first, second = await PostgresStore.open(url), await PostgresStore.open(url)
    try:
        await first.ensure_conversation(
            SessionKey("a", "i", "s"), conversation_id="c1", created_at=datetime.now(UTC)
        )
        draft = [RecordDraft(UserMessage(body="x"))]
        fence = await first.mint_fence("c1")
        await first.append("c1", draft, expected_seq=1, fence=fence)
        await first.append("c1", draft, expected_seq=2, fence=fence)  # the one-statement path
        await second.append("c1", draft, expected_seq=3, fence=fence)
        with pytest.raises(Conflict):  # first still believes 3 is the head
            await first.append("c1", draft, expected_seq=3, fence=fence)
        await first.append("c1", draft, expected_seq=4, fence=fence)
        newer = await second.mint_fence("c1")
        with pytest.raises(Fenced):  # first's head is right, but its fence is stale
            await first.append("c1", draft, expected_seq=5, fence=fence)
        await first.append("c1", draft, expected_seq=5, fence=newer)
        assert await second.verify("c1") == 6
        assert [r.seq for r in await second.read("c1")] == [1, 2, 3, 4, 5, 6]
    finally:
        await first.close()
        await second.close()


def _catalog(schema: str) -> list[tuple[object, ...]]:
    """Everything a migration defines: columns, constraints, indexes, and the version."""
    with psycopg.connect(POSTGRES_URL) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = %s ORDER BY 1, 2",
            (schema,),
        ).fetchall()
        constraints = conn.execute(
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE connamespace = %s::regnamespace ORDER BY 1, 2",
            (schema,),
        ).fetchall()
        indexes = conn.execute(
            "SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1, 2",
            (schema,),
        ).fetchall()
        version = conn.execute(
            sql.SQL("SELECT version FROM {}.tether_schema").format(sql.Identifier(schema))
        ).fetchall()
    return [
        *columns,
        *(
            (table.split(".")[-1], definition.replace(schema, "<schema>"))
            for table, definition in constraints
        ),
        *((table, definition.replace(schema, "<schema>")) for table, definition in indexes),
        *version,
    ]


@pytest.mark.parametrize("from_version", range(SCHEMA_VERSION))
async def test_a_migrated_schema_equals_a_fresh_one(from_version: int) -> None:
    fresh, old = fresh_schema(), fresh_schema()
    await (await PostgresStore.open(store_url(fresh))).close()
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(old)))
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(old)))
        for step in MIGRATIONS[:from_version]:
            await conn.execute(step)
        if from_version:
            await conn.execute("UPDATE tether_schema SET version = %s", (from_version,))
    await (await PostgresStore.open(store_url(old))).close()
    assert _catalog(old) == _catalog(fresh)


def _writers(schema: str) -> set[str]:
    """The transactions that wrote the schema's catalog rows (its tables, indexes,
    constraints and functions) and its version row, as they stand."""
    with psycopg.connect(POSTGRES_URL) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT xmin::text FROM pg_class WHERE relnamespace = %(s)s::regnamespace "
                "UNION SELECT xmin::text FROM pg_constraint "
                "WHERE connamespace = %(s)s::regnamespace "
                "UNION SELECT xmin::text FROM pg_proc WHERE pronamespace = %(s)s::regnamespace "
                "UNION SELECT xmin::text FROM {}.tether_schema"
            ).format(sql.Identifier(schema)),
            {"s": schema},
        ).fetchall()
    return {xid for (xid,) in rows}


async def test_processes_starting_together_migrate_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four stores opening a new schema at once, then a fifth: every migration step and
    backfill runs once in all, in one transaction; the others find the schema current and
    change nothing (a step run again, even an idempotent one, would show in both counts: its
    statement sent twice, and a catalog row or the version row rewritten by a second
    transaction)."""
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def logged(
        self: psycopg.AsyncConnection[Any], query: Any, *args: Any, **kwargs: Any
    ) -> Any:
        if isinstance(query, str):
            sent.append(query)
        return await execute(self, query, *args, **kwargs)

    backfilled: list[int] = []

    def counted(number: int, backfill: Callable[[Any], Awaitable[None]]) -> Any:
        async def run(conn: Any) -> None:
            backfilled.append(number)
            await backfill(conn)

        return run

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", logged)
    monkeypatch.setattr(
        schema_module, "BACKFILLS", {n: counted(n, fn) for n, fn in BACKFILLS.items()}
    )
    schema = fresh_schema()
    url = store_url(schema)
    stores = await asyncio.gather(*(PostgresStore.open(url) for _ in range(4)))
    stores.append(await PostgresStore.open(url))
    for store in stores:
        await store.close()
    assert [sent.count(step) for step in MIGRATIONS] == [1] * SCHEMA_VERSION
    assert sent.count("UPDATE tether_schema SET version = %s") == 1
    assert sorted(backfilled) == sorted(BACKFILLS)
    assert len(_writers(schema)) == 1


async def test_a_newer_schema_is_refused() -> None:
    schema = fresh_schema()
    await (await PostgresStore.open(store_url(schema))).close()
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("UPDATE {}.tether_schema SET version = 99").format(sql.Identifier(schema))
        )
    with pytest.raises(UnsupportedSchema) as caught:
        await PostgresStore.open(store_url(schema))
    assert (caught.value.found, caught.value.supported) == (99, SCHEMA_VERSION)


async def test_an_unreachable_server_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable):
        await PostgresStore.open("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2")


def _submission(key: SessionKey) -> NewSubmission:
    return NewSubmission(
        id="s1",
        key=key,
        conversation_id="c1",
        input={"kind": "message", "body": "hi"},
        created_at=datetime.now(UTC),
    )


async def test_a_store_listens_only_for_what_its_process_waits_on() -> None:
    """An API node that never claims must not be sent a notification per admission; each
    channel is taken up the first time it is waited on, without waiting for a poll."""
    url = store_url(fresh_schema())
    # Polls an hour apart: only a NOTIFY can wake these waits in time.
    waiter = await PostgresStore.open(url, poll_interval=3600)
    writer = await PostgresStore.open(url)
    try:
        assert waiter._wake.listener._task is None  # nothing waited on: no LISTEN connection
        key = SessionKey("a", "i", "s")
        await writer.ensure_conversation(key, conversation_id="c1", created_at=datetime.now(UTC))
        with waiter.listen("work") as work:  # the claim loop's wait: work and settlements
            async with asyncio.timeout(60):
                await work.wait()  # the LISTEN is in place: every waiter is told to look again
                work.clear()
                await writer.admit(_submission(key))
                await work.wait()  # the admission's NOTIFY, from another store
        fence = await writer.mint_fence("c1")
        appended = asyncio.ensure_future(waiter.wait_for_append("c1", after_seq=1))
        await writer.append("c1", [RecordDraft(UserMessage(body="x"))], expected_seq=1, fence=fence)
        async with asyncio.timeout(60):
            assert await appended == 2
    finally:
        await waiter.close()
        await writer.close()


async def test_a_dropped_listen_connection_comes_back_with_every_channel() -> None:
    url = store_url(fresh_schema())
    waiter = await PostgresStore.open(url, poll_interval=3600)
    writer = await PostgresStore.open(url)
    try:
        key = SessionKey("a", "i", "s")
        with waiter.listen("work") as work:
            async with asyncio.timeout(60):
                await work.wait()  # listening
            work.clear()
            async with await psycopg.AsyncConnection.connect(
                POSTGRES_URL, autocommit=True
            ) as admin:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE %s",
                    (f'LISTEN "{waiter.schema}.%%',),
                )
            async with asyncio.timeout(60):
                await work.wait()  # back: every waiter is told to look again
                work.clear()
                await writer.admit(_submission(key))
                await work.wait()  # and notifications arrive again
    finally:
        await waiter.close()
        await writer.close()
