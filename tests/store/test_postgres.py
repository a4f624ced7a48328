from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tether.store import Store
from tether.store.postgres import PostgresStore
from tether.testing.storetest import StoreConformance

from ..postgres import POSTGRES_URL, fresh_schema, store_url

pytestmark = pytest.mark.postgres


class TestPostgresStore(StoreConformance):
    async def make_store(self, directory: Path) -> Store:
        return await PostgresStore.open(store_url(fresh_schema()))

    async def tamper(self, store: Store, conversation_id: str, seq: int, body: bytes) -> None:
        assert isinstance(store, PostgresStore)
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
            await conn.execute(
                sql.SQL(
                    "UPDATE {}.records SET body = %s WHERE conversation_id = %s AND seq = %s"
                ).format(sql.Identifier(store.schema)),
                (body, conversation_id, seq),
            )
