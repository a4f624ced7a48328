"""The I/O-error loop (issue 46): a fixed workload replayed once per store call, the Nth
call failing with the backend's disk I/O error for N = 1, 2, ... until the workload makes
fewer than N calls. After each cut the runtime recovers without a restart where it can, a
client retries what it was refused, and then every acknowledged submission has settled
exactly once, no record is lost or written twice, and every log verifies.

CI tries the first cuts and then a sample of the rest (a few seconds); ``TETHER_SOAK=1``
tries every one (``TETHER_IO_CUT=N`` tries cut N alone, to look into one). The crash half
(the Nth store call killing the process) is ``test_failpoint_crash.py``.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from tether._failpoints import ARMED, disarm
from tether.engine import ManualClock, Receipt, Runtime
from tether.errors import StoreUnavailable
from tether.store import Store, SubmissionStatus
from tether.testing import failpoints

from ..sqlite import open_sqlite
from .agents import echo_agent, loop_agent
from .conftest import FAST
from .waits import WAIT

T = TypeVar("T")

WORK = (  # (agent, session, message): two in one session (their order holds), one alone
    ("loop", "a", "lookup the price"),
    ("echo", "a", "and then?"),
    ("echo", "b", "hello"),
)


@pytest.fixture(autouse=True)
def nothing_armed() -> Iterator[None]:
    assert not ARMED
    yield
    disarm()


async def _retrying(call: Callable[[], Awaitable[T]]) -> T:
    """What a client does when the server says the store is unavailable: asks again."""
    for _ in range(20):
        try:
            return await call()
        except StoreUnavailable:
            continue
    raise AssertionError("still failing after 20 tries: the fault was to happen once")


async def _paced(clock: ManualClock, done: Awaitable[T]) -> T:
    """Await ``done`` while moving the clock on a second at a time (leases, backoffs)."""
    task = asyncio.ensure_future(done)
    try:
        async with asyncio.timeout(WAIT):
            while not task.done():
                await clock.advance(1.0)
                await asyncio.wait({task}, timeout=0.005)
        return task.result()
    finally:
        task.cancel()


async def _start(store: Store, clock: ManualClock) -> Runtime:
    """A runtime started; one whose start the fault failed is closed and another started
    (the process's supervisor restarting the server)."""
    for _ in range(5):
        runtime = Runtime(
            {"loop": loop_agent(), "echo": echo_agent()}, store, **{**FAST, "clock": clock}
        )
        try:
            await runtime.start()
            return runtime
        except StoreUnavailable:
            await runtime.close()
    raise AssertionError("the runtime would not start")


@dataclass
class Cut:
    fired: int
    calls: int


async def run_cut(store: Store, cut: int) -> Cut:
    """The workload with the ``cut``-th store call failing, then its invariants checked."""
    clock = ManualClock()
    with failpoints(f"store.*=error(nth({cut}))") as armed:
        runtime = await _start(store, clock)
        try:
            receipts: list[Receipt] = []
            for n, (agent, session, body) in enumerate(WORK):
                dispatch = functools.partial(
                    runtime.dispatch, agent, "acme", body, session=session, dispatch_id=f"d-{n}"
                )
                receipts.append(await _retrying(dispatch))
            for receipt in receipts:
                waited = functools.partial(runtime.wait, receipt.submission_id)
                outcome = await _paced(clock, _retrying(waited))
                assert outcome["status"] == "succeeded", (cut, outcome)
        finally:
            await runtime.close()
        fired, calls = armed.fired("store.*"), armed.hits("store.*")
    # What is durable, read past the failpoints.
    submissions = {s.id: s for s in await store.list_submissions()}
    assert len(submissions) == len(WORK), cut
    assert all(s.status is SubmissionStatus.SETTLED for s in submissions.values()), cut
    for conversation_id in {r.conversation_id for r in receipts}:
        records = await store.read(conversation_id)
        assert await store.verify(conversation_id) == len(records), cut
        settled = Counter(r.submission_id for r in records if r.kind == "submission_settled")
        said = Counter(r.submission_id for r in records if r.kind == "user_message")
        mine = {r.submission_id for r in receipts if r.conversation_id == conversation_id}
        assert settled == Counter(mine) == said, (cut, settled, said)
        order = [r.submission_id for r in records if r.kind == "submission_settled"]
        assert order == [r.submission_id for r in receipts if r.conversation_id == conversation_id]
    return Cut(fired, calls)


def _cuts(calls: int, *, every: bool) -> list[int]:
    """Every cut (and as many again: the background loops' calls vary with the pacing, so a
    run may make more), or the first 12 and a spread of the rest."""
    if every:
        return list(range(1, 2 * calls + 1))
    return sorted({*range(1, 13), *range(13, calls + 1, max(1, calls // 12))})


def _made(directory: Path) -> Path:
    directory.mkdir()
    return directory


async def _store(directory: Path) -> Store:
    return await open_sqlite(_made(directory))


async def test_store_calls_failing_in_turn(tmp_path: Path) -> None:
    """CI's cuts: the first 12 and a spread of the rest."""
    await _loop(tmp_path, every=False)


@pytest.mark.slow
async def test_every_store_call_failing_in_turn(tmp_path: Path) -> None:
    """Every cut (``TETHER_SOAK=1``)."""
    await _loop(tmp_path, every=True)


async def _loop(tmp_path: Path, *, every: bool) -> None:
    clean = await _store(tmp_path / "clean")
    try:
        baseline = await run_cut(clean, 10**9)  # nothing fails: how many calls there are
    finally:
        await clean.close()
    assert baseline.fired == 0 and baseline.calls > 20
    only = os.environ.get("TETHER_IO_CUT")  # one cut, to look into a failure
    cuts = [int(only)] if only else _cuts(baseline.calls, every=every)
    fired = 0
    for cut in cuts:
        store = await _store(tmp_path / f"cut-{cut}")
        try:
            result = await run_cut(store, cut)
        finally:
            await store.close()
        fired += result.fired  # 0: this run made fewer calls than the cut
    # The calls the workload itself makes (admit, claim, append, settle) come first and
    # always: the early cuts all land.
    assert fired >= min(len(cuts), 12), (fired, cuts)
    print(f"I/O-error loop: {len(cuts)} cuts tried, {fired} landed, of {baseline.calls} calls")
