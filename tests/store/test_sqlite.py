import sqlite3
from pathlib import Path

from tether.store import SqliteStore, Store
from tether.testing.storetest import StoreConformance

from ..sqlite import open_sqlite


class TestSqliteStore(StoreConformance):
    async def make_store(self, directory: Path) -> Store:
        return await SqliteStore.open(directory)

    async def tamper(self, store: Store, conversation_id: str, seq: int, body: bytes) -> None:
        assert isinstance(store, SqliteStore)
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                "UPDATE records SET body = ? "
                "WHERE conversation = (SELECT number FROM conversations WHERE id = ?) AND seq = ?",
                (body, conversation_id, seq),
            )
        conn.close()

    async def truncate(self, store: Store, conversation_id: str, seq: int) -> None:
        assert isinstance(store, SqliteStore)
        with sqlite3.connect(store.path) as conn:
            conn.execute(
                "DELETE FROM records "
                "WHERE conversation = (SELECT number FROM conversations WHERE id = ?) AND seq > ?",
                (conversation_id, seq),
            )
        conn.close()


class TestSqliteStoreThreadCommits(TestSqliteStore):
    """The same contract when every commit runs on the writer thread (on copies of a
    migrated file: ``TestSqliteStore`` runs it on files each store migrated)."""

    async def make_store(self, directory: Path) -> Store:
        return await open_sqlite(directory, inline_commits=False)
