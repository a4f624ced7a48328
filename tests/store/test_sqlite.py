import sqlite3
from pathlib import Path

from tether.store import SqliteStore, Store
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
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


async def test_a_migrated_file_is_stamped_with_its_last_step_and_reopens(tmp_path: Path) -> None:
    """The version stamped is the number of steps: a stamp behind them would run the last
    step again at the next open (its ``CREATE TABLE`` failing)."""
    assert SCHEMA_VERSION == len(_MIGRATIONS)
    await (await SqliteStore.open(tmp_path)).close()
    store = await SqliteStore.open(tmp_path)
    try:
        with sqlite3.connect(store.path) as conn:
            [(version,)] = conn.execute("PRAGMA user_version").fetchall()
        conn.close()
        assert version == SCHEMA_VERSION
    finally:
        await store.close()
