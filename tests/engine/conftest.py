from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tether.engine import ManualClock, Runtime
from tether.models import ModelRetryPolicy
from tether.store import Store

FAST: dict[str, Any] = {
    "claim_interval": 0.02,
    "lease": 2.0,
    "timeout_grace": 0.5,
    "backoff_cap": 0.0,
    "model_retry": ModelRetryPolicy(first_delay=0.0, max_delay=0.0),
}
"""Short timings, and retries at once: a backoff that is not what a test is about needs no
time to pass (on a manual clock, nothing would move it)."""


@pytest.fixture
async def make_runtime(store: Store, clock: ManualClock) -> AsyncIterator[Callable[..., Runtime]]:
    """Build (and later close) runtimes over the test's store and on its ``clock``, with fast
    timings. A test that needs real time says so: ``make_runtime(agents, clock=SystemClock())``."""
    made: list[Runtime] = []

    def make(agents: dict[str, Any], **settings: Any) -> Runtime:
        runtime = Runtime(agents, store, **{**FAST, "clock": clock, **settings})
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()
