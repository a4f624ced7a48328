"""The tests' SQLite stores open on copies of one migrated file (``tests/sqlite.py``): a copy
is what a fresh migration makes, and a file already there is opened, never replaced."""

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from tether.store import SQLITE_FILENAME, SessionKey, SqliteStore

from .sqlite import open_sqlite


def _shape(database: Path) -> list[object]:
    """The schema (every table, index and trigger as created), each table's rows, the
    version and the journal mode."""
    with sqlite3.connect(database) as conn:
        found: list[object] = [
            *conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"),
            *conn.execute("PRAGMA user_version"),
            *conn.execute("PRAGMA journal_mode"),
        ]
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        for (table,) in tables.fetchall():
            found.append((table, conn.execute(f'SELECT * FROM "{table}"').fetchall()))
    conn.close()
    return found


async def test_a_copy_is_what_a_fresh_migration_makes(tmp_path: Path) -> None:
    fresh, copied = tmp_path / "fresh", tmp_path / "copied"
    fresh.mkdir()
    copied.mkdir()
    await (await SqliteStore.open(fresh)).close()
    await (await open_sqlite(copied)).close()
    assert _shape(copied / SQLITE_FILENAME) == _shape(fresh / SQLITE_FILENAME)


async def test_a_file_already_there_is_opened_not_replaced(tmp_path: Path) -> None:
    store = await open_sqlite(tmp_path)
    await store.ensure_conversation(
        SessionKey("a", "i", "s"), conversation_id="c1", created_at=datetime.now(UTC)
    )
    await store.close()
    again = await open_sqlite(tmp_path)
    try:
        assert (await again.get_conversation("c1")).id == "c1"
    finally:
        await again.close()
