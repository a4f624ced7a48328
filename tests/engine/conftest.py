from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tether.engine import Runtime
from tether.models import ModelRetryPolicy
from tether.store import Store

FAST: dict[str, Any] = {
    "claim_interval": 0.02,
    "lease": 2.0,
    "timeout_grace": 0.5,
    "backoff_cap": 0.05,
    "model_retry": ModelRetryPolicy(first_delay=0.01, max_delay=0.05),
}


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
