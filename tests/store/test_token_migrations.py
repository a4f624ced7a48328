"""The migrations that add API tokens (SQLite v15, PostgreSQL v10): a store written before
them opens with no tokens and its data intact, and then keeps tokens; a migrated SQLite file
ends with exactly the schema of a fresh one. Tokens are durable: they survive a reopen of a
SQLite file and are seen, and revoked, through a second PostgreSQL store; the digest is
found by its index."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tether.store import NewToken, SqliteStore, TokenRow
from tether.store._sqlite_schema import SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import POSTGRES_URL, fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at, sqlite_schema

TABLES = ("conversations", "records", "submissions", "attempts", "workers")
"""What a store before tokens held (with v14's columns)."""


def _token(fx: Fixtures, token_id: str) -> NewToken:
    return NewToken(
        id=token_id,
        digest=hashlib.sha256(token_id.encode()).hexdigest(),
        subject="support-1",
        created_at=fx.at(0),
        tenant="acme",
        scopes=("sessions:read",),
    )


async def _written(store: CompleteStore) -> str:
    """A queued submission and a worker, written before tokens existed."""
    fx = Fixtures(store)
    await store.put_worker("w", {"support": ["v1"]}, now=fx.at(0))
    return (await fx.admit("queued")).id


async def _tokens_work(store: CompleteStore, queued: str) -> None:
    fx = Fixtures(store)
    assert (await store.get_submission(queued)).status.value == "queued"
    assert [w.owner_id for w in await store.list_workers()] == ["w"]
    assert await store.list_tokens(include_revoked=True) == []
    kept = await store.put_token(_token(fx, "tok_a"))
    assert await store.find_token(kept.digest) == kept


async def test_the_sqlite_v15_migration_adds_an_empty_tokens_table(tmp_path: Path) -> None:
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        queued = await _written(store)
    sqlite_at(14, written / "tether.db", old, TABLES)
    async with await SqliteStore.open(old) as store:
        await _tokens_work(store, queued)
    async with await SqliteStore.open(fresh):
        pass
    assert sqlite_schema(old / "tether.db") == sqlite_schema(fresh / "tether.db")
    assert sqlite_schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_v10_migration_adds_an_empty_tokens_table() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        queued = await _written(store)
    await postgres_at(9, written_schema, old, TABLES, MIGRATIONS)
    async with await PostgresStore.open(store_url(old)) as store:
        await _tokens_work(store, queued)
        tokens = await store.list_tokens()
    async with await PostgresStore.open(store_url(old)) as again:  # a migrated schema reopens
        assert await again.list_tokens() == tokens


async def test_sqlite_tokens_survive_a_reopen(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path) as store:
        fx = Fixtures(store)
        kept = await store.put_token(_token(fx, "tok_a"))
        revoked = await store.revoke_token(
            (await store.put_token(_token(fx, "tok_b"))).id, now=fx.at(3)
        )
    async with await SqliteStore.open(tmp_path) as reopened:
        assert await reopened.find_token(kept.digest) == kept
        assert await reopened.list_tokens(include_revoked=True) == [kept, revoked]


@pytest.mark.postgres
async def test_a_second_postgres_store_sees_the_tokens_and_their_revocation() -> None:
    url = store_url(fresh_schema())
    async with await PostgresStore.open(url) as first, await PostgresStore.open(url) as second:
        fx = Fixtures(first)
        kept = await first.put_token(_token(fx, "tok_a"))
        assert await second.find_token(kept.digest) == kept
        revoked = await second.revoke_token("tok_a", now=fx.at(3))
        assert await first.find_token(kept.digest) == revoked
        assert await first.revoke_token("tok_a", now=fx.at(9)) == revoked
        assert await first.list_tokens() == []


def _sqlite_plan(path: Path, digest: str) -> list[str]:
    with sqlite3.connect(path / "tether.db") as conn:
        rows = conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM tokens WHERE digest = ?", (digest,)
        ).fetchall()
    conn.close()
    return [row[-1] for row in rows]


async def test_a_digest_is_found_by_its_index_on_sqlite(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path) as store:
        kept: TokenRow = await store.put_token(_token(Fixtures(store), "tok_a"))
    assert _sqlite_plan(tmp_path, kept.digest) == [
        "SEARCH tokens USING INDEX tokens_by_digest (digest=?)"
    ]


@pytest.mark.postgres
async def test_a_digest_is_found_by_its_index_on_postgres() -> None:
    schema = fresh_schema()
    async with await PostgresStore.open(store_url(schema)) as store:
        kept = await store.put_token(_token(Fixtures(store), "tok_a"))
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await conn.execute("SET enable_seqscan = off")
        plan = await (
            await conn.execute("EXPLAIN SELECT * FROM tokens WHERE digest = %s", (kept.digest,))
        ).fetchall()
    assert "tokens_by_digest" in plan[0][0], plan
