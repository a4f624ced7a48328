"""An attempt leaves nothing behind once it settles (memory stays flat), and checks what user
code hands it with typed errors."""

import asyncio
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tether.engine import AgentDefinition, Runtime
from tether.journal import Journal, LogView
from tether.store import Store

from .agents import echo_agent
from .test_runtime import settle

Make = Callable[..., Runtime]


@contextmanager
def collector_off() -> Iterator[None]:
    """What only the cyclic collector would free stays in ``gc.get_objects()`` meanwhile."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _alive(kind: type) -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


async def test_a_settled_attempt_leaves_no_journal_for_the_collector(
    make_runtime: Make, store: Store
) -> None:
    # A journal refers back to its attempt (its steer source, its wrappers), and the attempt
    # kept the journal: each settled attempt left that cycle, holding the journal's view (a
    # whole conversation's records, long after the view cache had dropped it), for the
    # collector's next full pass, which a server's heap of long-lived objects puts off.
    async with make_runtime({"echo": echo_agent()}) as runtime:
        runtime.view_cache_bytes = 0  # only the newest view is kept
        with collector_off():
            journals, views = _alive(Journal), _alive(LogView)
            for n in range(12):
                receipt = await runtime.dispatch("echo", "acme", f"hi {n}", session=f"s{n % 4}")
                async with asyncio.timeout(60):
                    await runtime.wait(receipt.submission_id)
            assert _alive(Journal) == journals
            assert _alive(LogView) <= views + 1  # the view cache's one


async def test_an_initializer_that_returns_no_agent_spec_fails_the_run(
    make_runtime: Make,
) -> None:
    """User code, checked with a typed error that says what came back (an ``assert`` would
    vanish under ``python -O`` and fail later, somewhere else)."""
    odd = AgentDefinition(lambda instance, env: {"harness": "not a spec"})  # type: ignore[arg-type,return-value]
    agents = {"odd": odd}
    async with make_runtime(agents) as runtime:
        receipt = await runtime.dispatch("odd", "acme", "hi")
        settled = await settle(runtime, receipt.submission_id)
    assert settled["status"] == "failed" and settled["errorCode"] == "run_failed"
    assert "returned dict, not an AgentSpec" in str(settled["error"])
