"""The engine's clock: leases, heartbeats, ticks and deadlines move when a test moves time.

Each engine test here runs a runtime on a :class:`ManualClock` and advances it: a lease
expires, a heartbeat renews, a deadline passes, without the test sleeping for any of it.
"""

import ast
import asyncio
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from tests.engine.agents import echo_agent, loop_agent, slow_tools
from tether.engine import (
    EngineEvent,
    ManualClock,
    Receipt,
    RecoveryDecided,
    Runtime,
    SystemClock,
)
from tether.records import SubmissionSettled
from tether.store import NewSubmission, SessionKey, Store, Submission, SubmissionStatus

from .waits import advance_until

Make = Callable[..., Runtime]


async def settle(runtime: Runtime, submission_id: str) -> dict[str, JsonValue]:
    async with asyncio.timeout(60):  # room for a loaded machine, under the 120 s test timeout
        return await runtime.wait(submission_id)


async def until(check: Callable[[], object], what: str) -> None:
    """Poll a condition that a background task makes true (bounded, not timed)."""
    try:
        async with asyncio.timeout(60):
            while True:  # polled: the condition is another task's doing, not an event
                if check():
                    return
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"never happened: {what}") from None


async def dispatch_until_started(runtime: Runtime, agent: str, started: asyncio.Event) -> Receipt:
    """Dispatch to ``agent`` and return once its (slow) tool has started."""
    receipt = await runtime.dispatch(agent, "acme", "lookup x")
    async with asyncio.timeout(60):
        await started.wait()
    return receipt


# --- the clocks -------------------------------------------------------------------------


async def test_a_manual_clock_moves_only_when_advanced() -> None:
    clock = ManualClock()
    start = clock.now()
    woken: list[str] = []

    async def sleeper(name: str, seconds: float) -> None:
        await clock.sleep(seconds)
        woken.append(name)

    tasks = [asyncio.create_task(sleeper(n, s)) for n, s in (("late", 10), ("early", 5))]
    await until(lambda: clock.pending == 2, "both asleep")
    await asyncio.sleep(0)  # the point: a loop iteration, and still no time has passed
    assert woken == [] and clock.now() == start
    await clock.advance(5)
    await until(lambda: woken == ["early"], "the early one wakes")
    await clock.advance(5)
    await asyncio.gather(*tasks)
    assert woken == ["early", "late"]
    assert clock.now() - start == timedelta(seconds=10) and clock.monotonic() == 10


async def test_a_manual_wait_ends_with_what_it_waits_for_or_its_time() -> None:
    clock = ManualClock()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    done.set_result(None)
    await clock.wait({done}, 3600)  # returns at once: no time needed
    event = asyncio.Event()
    waiting = asyncio.create_task(clock.wait_event(event, 30))
    await until(lambda: clock.pending == 1, "the wait is armed")
    await clock.advance(30)
    await waiting
    assert clock.pending == 0  # its timer was taken back, nothing leaks into later waits


async def test_the_system_clock_waits_in_real_time_for_what_is_done() -> None:
    clock = SystemClock()
    event = asyncio.Event()
    event.set()
    await clock.wait_event(event, 3600)
    await clock.wait({asyncio.ensure_future(asyncio.sleep(0))}, 3600)
    before = clock.monotonic()
    await clock.wait_event(asyncio.Event(), 0.01)  # nothing comes: its time ends it
    assert clock.monotonic() >= before + 0.01


WALL_CLOCK_READS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("date", "today"),
    ("time", "time"),
    ("time", "time_ns"),
    ("time", "monotonic"),
}


def test_the_engine_reads_time_only_through_its_clock() -> None:
    """A wall-clock read outside ``_clock.py`` is time a manual clock cannot move."""
    engine = Path(__file__).parents[2] / "src" / "tether" / "engine"
    reads = [
        f"{path.name}:{node.lineno}"
        for path in sorted(engine.glob("*.py"))
        if path.name != "_clock.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and (node.func.value.id, node.func.attr) in WALL_CLOCK_READS
    ]
    assert reads == [], "the engine reads the wall clock: ask the context's Clock instead"


# --- the engine on a manual clock -------------------------------------------------------


async def test_a_hung_tool_is_stopped_when_time_passes_its_deadline(make_runtime: Make) -> None:
    clock = ManualClock()
    started = asyncio.Event()
    hung = loop_agent(slow_tools(3600, started), timeout=600)
    async with make_runtime({"hung": hung}, clock=clock) as runtime:
        receipt = await dispatch_until_started(runtime, "hung", started)
        await clock.advance(601)
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == "timeout_exceeded"


async def test_a_heartbeat_renews_the_lease_as_time_passes(
    make_runtime: Make, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ManualClock()
    started, release, renewed = asyncio.Event(), asyncio.Event(), asyncio.Event()
    renew_lease = store.renew_lease

    async def renewing(*args: Any, **kwargs: Any) -> Submission:
        submission = await renew_lease(*args, **kwargs)
        renewed.set()  # a renewal emits no event and appends nothing: heard here
        return submission

    monkeypatch.setattr(store, "renew_lease", renewing)
    agents = {"slow": loop_agent(slow_tools(3600, started, release))}
    async with make_runtime(agents, clock=clock, lease=30, heartbeat=10) as runtime:
        receipt = await dispatch_until_started(runtime, "slow", started)
        first = (await store.get_submission(receipt.submission_id)).lease_expires_at
        assert first is not None
        await clock.advance(10)
        async with asyncio.timeout(60):
            await renewed.wait()
        lease = (await store.get_submission(receipt.submission_id)).lease_expires_at
        assert lease == first + timedelta(seconds=10)  # renewed a heartbeat on
        release.set()
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"


async def test_an_expired_lease_is_reclaimed_once_time_passes_it(
    make_runtime: Make, store: Store
) -> None:
    clock = ManualClock()
    now = clock.now()
    key = SessionKey("echo", "acme", "orphan")
    await store.admit(NewSubmission("sub-o", key, "conv-o", {"kind": "user", "body": "x"}, now))
    # A worker that never took a liveness lock claimed it and vanished: only its lease ends it.
    await store.claim(
        "sub-o",
        attempt_id="dead",
        owner_id="ghost",
        lease_expires_at=now + timedelta(seconds=30),
        now=now,
    )
    async with make_runtime({"echo": echo_agent()}, clock=clock, lease=30) as runtime:
        await until(lambda: clock.pending > 0, "the claim loop waits for its next tick")
        for _ in range(3):  # ticks short of the lease's end: it stays the ghost's
            await clock.advance(9)
            await asyncio.sleep(0.01)  # a claim pass may run: the point is that none reclaims
        assert (await store.get_submission("sub-o")).status is SubmissionStatus.RUNNING
        # The claim loop's tick is clock time too: a pass that was running when time jumped
        # waits for the next move.
        outcome = await advance_until(clock, runtime.wait("sub-o"), step=1)
    assert outcome["status"] == "succeeded"
    info = await store.get_submission("sub-o")
    assert info.attempt_count == 2 and info.last_error == "lease expired"


async def test_a_stuck_settlement_is_finished_by_the_sweep_a_lease_later(
    make_runtime: Make, store: Store
) -> None:
    clock = ManualClock()
    # No capacity to run anything: only the sweep can move the submission.
    agents = {"echo": echo_agent()}
    async with make_runtime(agents, clock=clock, lease=30, max_concurrent_runs=0) as runtime:
        now = clock.now()
        await store.admit(
            NewSubmission(
                "sub-s", SessionKey("echo", "acme"), "conv-s", {"kind": "user", "body": "x"}, now
            )
        )
        # Another worker claimed it and died between reserving and appending the record.
        claimed = await store.claim(
            "sub-s",
            attempt_id="a1",
            owner_id="ghost",
            lease_expires_at=now + timedelta(seconds=3600),
            now=now,
        )
        payload = SubmissionSettled(status="succeeded", result="recovered").to_json_object()
        await store.reserve_settlement(
            "sub-s", attempt_id=str(claimed.attempt_id), settlement=payload
        )
        # The first sweep, a lease after start, notes it; the next one finishes it.
        assert await advance_until(clock, runtime.wait("sub-s"), step=10) == payload


async def test_an_abort_from_elsewhere_is_heard_at_the_next_heartbeat(
    make_runtime: Make, store: Store
) -> None:
    clock = ManualClock()
    started = asyncio.Event()
    agents = {"slow": loop_agent(slow_tools(3600, started))}
    async with make_runtime(agents, clock=clock, lease=30, heartbeat=10) as runtime:
        receipt = await dispatch_until_started(runtime, "slow", started)
        # Another process asks (only the store knows): this one hears it when it renews.
        await store.request_cancel(receipt.submission_id, now=clock.now())
        await clock.advance(10)
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["status"] == "aborted"


async def test_a_lost_lease_is_noticed_at_the_next_heartbeat_and_the_run_gives_up(
    make_runtime: Make, store: Store
) -> None:
    clock = ManualClock()
    started = asyncio.Event()
    lease_lost = asyncio.Event()

    def observe(event: EngineEvent) -> None:
        if isinstance(event, RecoveryDecided) and event.decision == "lease_lost":
            lease_lost.set()

    agents = {"slow": loop_agent(slow_tools(3600, started))}
    async with make_runtime(
        agents, clock=clock, lease=30, heartbeat=10, observers=[observe]
    ) as runtime:
        receipt = await dispatch_until_started(runtime, "slow", started)
        running = await store.get_submission(receipt.submission_id)
        # Its claim is taken away (as a peer that judged it dead would): the renewal fails.
        await store.release(running.id, attempt_id=str(running.attempt_id), last_error="taken")
        await clock.advance(10)
        async with asyncio.timeout(60):  # the run notices it lost its lease
            await lease_lost.wait()
        assert (await store.get_submission(running.id)).status is not SubmissionStatus.SETTLED
