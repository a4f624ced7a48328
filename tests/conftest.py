"""Fixtures shared across the test tree."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.store import MemoryStore, SqliteStore, Store


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each test runs on the reference in-memory store and on SQLite."""
    opened: Store = MemoryStore() if request.param == "memory" else await SqliteStore.open(tmp_path)
    yield opened
    await opened.close()
