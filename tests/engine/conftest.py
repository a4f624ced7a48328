from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tether.engine import Runtime
from tether.store import MemoryStore, SqliteStore, Store

FAST: dict[str, Any] = {
    "claim_interval": 0.02,
    "lease": 2.0,
    "timeout_grace": 0.5,
    "backoff_cap": 0.05,
}


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened: Store = MemoryStore() if request.param == "memory" else await SqliteStore.open(tmp_path)
    yield opened
    await opened.close()


@pytest.fixture
async def make_runtime(store: Store) -> AsyncIterator[Callable[..., Runtime]]:
    """Build (and later close) runtimes over the test's store, with fast timings."""
    made: list[Runtime] = []

    def make(agents: dict[str, Any], **settings: Any) -> Runtime:
        runtime = Runtime(agents, store, **{**FAST, **settings})
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()
