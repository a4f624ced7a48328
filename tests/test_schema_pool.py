"""The pool of migrated PostgreSQL schemas the tests' stores open on (``tests/postgres.py``):
a schema handed out again is what a fresh migration makes, to the rows and the identities,
and one a test changed is not handed out again."""

from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from tether.records import RecordDraft, UserMessage
from tether.store import SessionKey
from tether.store.postgres import PostgresStore

from .postgres import POSTGRES_URL, fresh_schema, open_pooled, store_url

pytestmark = pytest.mark.postgres


def _contents(schema: str) -> dict[str, object]:
    """Each table's row count (``tether_schema``'s rows themselves) and each sequence's state."""
    found: dict[str, object] = {}
    with psycopg.connect(POSTGRES_URL) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            name = sql.Identifier(schema, table)
            query = "SELECT * FROM {}" if table == "tether_schema" else "SELECT count(*) FROM {}"
            found[table] = conn.execute(sql.SQL(query).format(name)).fetchall()
        sequences = conn.execute(
            "SELECT sequencename FROM pg_sequences WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (sequence,) in sequences:
            name = sql.Identifier(schema, sequence)
            state = sql.SQL("SELECT last_value, is_called FROM {}").format(name)
            found[f"sequence {sequence}"] = conn.execute(state).fetchall()
    return found


async def _fresh_contents() -> dict[str, object]:
    schema = fresh_schema()
    await (await PostgresStore.open(store_url(schema))).close()
    return _contents(schema)


async def test_a_schema_comes_back_empty_with_its_identities_restarted() -> None:
    store = await open_pooled()
    schema = store.schema
    await store.ensure_conversation(
        SessionKey("a", "i", "s"), conversation_id="c1", created_at=datetime.now(UTC)
    )
    fence = await store.mint_fence("c1")
    await store.append("c1", [RecordDraft(UserMessage(body="x"))], expected_seq=1, fence=fence)
    with psycopg.connect(POSTGRES_URL) as conn:  # a submission's position drawn
        conn.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'position'))", (f"{schema}.submissions",)
        )
    assert _contents(schema) != await _fresh_contents()
    await store.close()
    again = await open_pooled()
    try:
        assert again.schema == schema
        assert _contents(schema) == await _fresh_contents()
    finally:
        await again.close()


async def test_a_schema_a_test_changed_is_not_handed_out_again() -> None:
    store = await open_pooled()
    schema = store.schema
    with psycopg.connect(POSTGRES_URL) as conn:
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD COLUMN extra INT").format(sql.Identifier(schema, "records"))
        )
    await store.close()
    again = await open_pooled()
    try:
        assert again.schema != schema
    finally:
        await again.close()


async def test_closing_twice_gives_a_schema_back_once() -> None:
    store = await open_pooled()
    await store.close()
    await store.close()
    first, second = await open_pooled(), await open_pooled()
    try:
        assert first.schema != second.schema
    finally:
        await first.close()
        await second.close()
