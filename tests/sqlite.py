"""SQLite stores for tests, on a copy of a database file migrated once per process.

Migrating a new file runs every step with its fsyncs (about 12 ms of CPU and, on a virtual
disk, 50-100 ms of waiting); copying the file one fresh migration made costs a fiftieth of
that, and opens to the same bytes: the copy is of a file nothing but the migration wrote
(closed, so its WAL is checkpointed into it). A test of opening or migrating a file opens
``SqliteStore`` on a directory of its own as before; so does the conformance suite's
``TestSqliteStore``, which keeps the whole contract on stores that migrated themselves.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from tether.store import SQLITE_FILENAME, SqliteStore

__all__ = ("open_sqlite",)

_template: Path | None = None


async def open_sqlite(directory: Path, **options: Any) -> SqliteStore:
    """The store of ``directory``: on a copy of a freshly migrated ``tether.db`` unless the
    directory holds one already (then that one, as ``SqliteStore.open`` would)."""
    global _template
    if _template is None:
        folder = Path(tempfile.mkdtemp(prefix="tether-sqlite-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        await (await SqliteStore.open(folder)).close()
        _template = folder / SQLITE_FILENAME
    database = directory / SQLITE_FILENAME
    if not database.exists():
        shutil.copyfile(_template, database)
    return await SqliteStore.open(directory, **options)
