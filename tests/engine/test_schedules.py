"""Durable schedules (issue 22 item 4): each window fires once, on every store, across
restarts and workers; missed windows are skipped or caught up; cron reads its time zone.

Time is a :class:`ManualClock`: a test moves it past a window's start, then runs a pass of
the scheduler itself (``tick``) so that what it asserts next is what that pass did (the
runtime's own scheduler task may be passing at the same moment: a window admitted twice is
admitted once, which is the point).
"""

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.engine.agents import echo_agent
from tests.engine.conftest import FAST
from tests.engine.test_clock import until
from tests.engine.waits import advance_until, until_emitted
from tests.postgres import store_url
from tether.engine import (
    MAX_CATCH_UP,
    InvalidSchedule,
    ManualClock,
    Runtime,
    Schedule,
    ScheduleConflict,
    ScheduleNotFound,
)
from tether.engine._scheduler import Scheduler
from tether.errors import StoreUnavailable, UnknownAgent
from tether.records import Signal
from tether.store import MemoryStore, ScheduleRow, Store, open_store
from tether.testing.storetest import CompleteStore

Make = Callable[..., Runtime]
T0 = datetime(2026, 1, 5, 8, 58, 30, tzinfo=UTC)
"""A Monday, half a minute into a minute: a minutely window started 30 s ago."""
AGENTS = {"echo": echo_agent()}


def minutely(**options: Any) -> Schedule:
    return Schedule("echo", "acme", **{"every": 60, "grace": 10, "body": "tick", **options})


def at(hour: int, minute: int, day: int = 5) -> str:
    return f"2026-01-{day:02d}T{hour:02d}:{minute:02d}:00Z"


def scheduler(runtime: Runtime) -> Scheduler:
    assert runtime._scheduler is not None, "a worker runtime runs a scheduler"
    return runtime._scheduler


async def fired(store: Store) -> list[str]:
    """The windows admitted, as ``<schedule id>:<window start>``, in admission order."""
    return [
        s.dispatch_id.removeprefix("schedule:")
        for s in await store.list_submissions()
        if s.dispatch_id.startswith("schedule:")
    ]


async def move(clock: ManualClock, seconds: float, *runtimes: Runtime) -> None:
    """Time moves on; then a pass of each runtime's scheduler, all at once."""
    await clock.advance(seconds)
    await asyncio.gather(*(scheduler(r).tick() for r in runtimes))


async def all_settled(runtime: Runtime, store: Store) -> None:
    for submission in await store.list_submissions():
        async with asyncio.timeout(60):
            settlement = await runtime.wait(submission.id)
        assert settlement["status"] == "succeeded", settlement


async def second_store(store: Store) -> Store:
    """Another handle on the test's store: a second pool on the same database (the same
    object for the in-memory store, which lives in this process only)."""
    if isinstance(store, MemoryStore):
        return store
    schema = getattr(store, "schema", None)  # PostgreSQL: the same schema, another pool
    return await open_store(store_url(schema) if schema else store.url)


# --- firing -------------------------------------------------------------------------------


async def test_each_window_fires_once(make_runtime: Make, store: Store) -> None:
    clock = ManualClock(T0)
    schedule = minutely()
    runtime = make_runtime(AGENTS, clock=clock, schedules=[schedule])
    await runtime.start()
    await scheduler(runtime).tick()
    assert await fired(store) == []  # 08:58 started 30 s ago, past its grace: missed
    await move(clock, 30, runtime)  # 08:59:00
    await move(clock, 0, runtime)
    await move(clock, 59, runtime)  # 08:59:59: nothing new
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}"]
    await move(clock, 1, runtime)  # 09:00:00
    await move(clock, 30, runtime)
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}", f"{schedule.id}:{at(9, 0)}"]
    await all_settled(runtime, store)
    [first, _] = await store.list_submissions()
    assert first.input == {
        "kind": "signal",
        "body": "tick",
        "signal": {"type": "schedule", "sender": {"schedule": schedule.id}, "tag": at(8, 59)},
    }
    assert first.key.agent == "echo" and first.key.instance == "acme"
    assert first.key.session == "default"


async def test_the_scheduler_wakes_at_a_windows_start_by_itself(make_runtime: Make) -> None:
    """No pass asked for: the runtime's own task sleeps until the next window."""
    clock = ManualClock(T0)
    schedule = Schedule("echo", "acme", every=60, body="tick", kind="user", session="cron")
    runtime = make_runtime(AGENTS, clock=clock, schedules=[schedule])
    await runtime.start()
    store = runtime.store
    await until(lambda: clock.pending > 0, "the runtime waits for time to pass")

    async def windows(count: int) -> None:
        async def admitted() -> bool:
            return len(await fired(store)) >= count

        await advance_until(clock, until_emitted(runtime, admitted), step=1)

    await windows(1)  # 08:58 is within its grace (60 s): fired at once
    await windows(2)
    assert await fired(store) == [f"{schedule.id}:{at(8, 58)}", f"{schedule.id}:{at(8, 59)}"]
    [submission, _] = await store.list_submissions()
    assert submission.input == {"kind": "user", "body": "tick"}
    assert submission.key.session == "cron"


async def test_a_restarted_runtime_does_not_fire_a_window_again(
    make_runtime: Make, store: Store
) -> None:
    clock = ManualClock(T0)
    schedule = minutely()
    first = make_runtime(AGENTS, clock=clock, schedules=[schedule])
    await first.start()
    await move(clock, 30, first)
    await all_settled(first, store)
    await first.close()
    again = make_runtime(AGENTS, clock=clock, schedules=[schedule])
    await again.start()
    await move(clock, 5, again)  # 08:59 is still on time: this runtime tries it too
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}"]
    await move(clock, 55, again)
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}", f"{schedule.id}:{at(9, 0)}"]
    await all_settled(again, store)


async def test_two_workers_on_one_store_fire_each_window_once(
    make_runtime: Make, store: Store
) -> None:
    clock = ManualClock(T0)
    schedule = minutely()
    other_store = await second_store(store)
    try:
        first = make_runtime(AGENTS, clock=clock, schedules=[schedule])
        second = Runtime(AGENTS, other_store, clock=clock, schedules=[schedule], **FAST)
        await first.start()
        await second.start()
        try:
            for seconds in (30, 60, 60):  # 08:59, 09:00, 09:01
                await move(clock, seconds, first, second)
            assert await fired(store) == [
                f"{schedule.id}:{at(8, 59)}",
                f"{schedule.id}:{at(9, 0)}",
                f"{schedule.id}:{at(9, 1)}",
            ]
            await all_settled(first, store)
        finally:
            await second.close()
    finally:
        if other_store is not store:
            await other_store.close()


# --- missed windows -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("catch_up", "caught"),
    [(None, []), (2, [(8, 59), (9, 0)]), (5, [(8, 56), (8, 57), (8, 58), (8, 59), (9, 0)])],
)
async def test_missed_windows_are_skipped_or_caught_up_oldest_first(
    make_runtime: Make, store: Store, catch_up: int | None, caught: list[tuple[int, int]]
) -> None:
    """The worker starts at 09:00:30, 30 s into a window whose grace is 10 s: that window
    and the ones before it were missed. Skip drops them; catch_up=N fires the latest N."""
    clock = ManualClock(T0 + timedelta(minutes=2))
    policy = {"missed": "catch_up", "catch_up": catch_up} if catch_up else {}
    schedule = minutely(**policy)
    runtime = make_runtime(AGENTS, clock=clock, schedules=[schedule])
    await runtime.start()
    await move(clock, 0, runtime)
    assert await fired(store) == [f"{schedule.id}:{at(h, m)}" for h, m in caught]
    await move(clock, 30, runtime)  # 09:01: on time, whatever the policy
    assert await fired(store) == [f"{schedule.id}:{at(h, m)}" for h, m in [*caught, (9, 1)]]
    await all_settled(runtime, store)
    conversation = await runtime.conversation("echo", "acme")
    tags = [
        record.payload.tag
        for record in await runtime.records(conversation.id)
        if isinstance(record.payload, Signal)
    ]
    assert tags == [at(h, m) for h, m in [*caught, (9, 1)]]  # run in the order admitted


async def test_a_schedule_added_at_run_time_fires_nothing_from_before_it_was(
    make_runtime: Make, store: Store
) -> None:
    clock = ManualClock(T0)
    runtime = make_runtime(AGENTS, clock=clock)
    await runtime.start()
    schedule = minutely(missed="catch_up", catch_up=5)
    info = await runtime.add_schedule(schedule)
    assert info.source == "durable" and info.created_at == T0
    assert info.next_fire_at == T0 + timedelta(seconds=30)
    await move(clock, 0, runtime)
    assert await fired(store) == []  # 08:58 and before: earlier than the schedule
    await move(clock, 30, runtime)
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}"]
    await all_settled(runtime, store)


# --- cron and time zones ------------------------------------------------------------------


async def test_a_cron_schedule_fires_in_its_time_zone(make_runtime: Make, store: Store) -> None:
    clock = ManualClock(datetime(2026, 1, 5, 13, 59, 50, tzinfo=UTC))  # 08:59:50 in New York
    schedule = Schedule(
        "echo", "acme", cron="0 9 * * MON-FRI", timezone="America/New_York", body="digest"
    )
    runtime = make_runtime(AGENTS, clock=clock, schedules=[schedule])
    await runtime.start()
    [info] = await runtime.schedules()
    assert info.source == "config" and info.created_at is None
    assert info.next_fire_at == datetime(2026, 1, 5, 14, 0, tzinfo=UTC)
    await move(clock, 0, runtime)
    assert await fired(store) == []  # Friday's 09:00 is long gone
    await move(clock, 10, runtime)
    assert await fired(store) == [f"{schedule.id}:2026-01-05T14:00:00Z"]
    [info] = await runtime.schedules()
    assert info.next_fire_at == datetime(2026, 1, 6, 14, 0, tzinfo=UTC)
    await all_settled(runtime, store)


# --- durable schedules across nodes -------------------------------------------------------


async def test_schedules_added_and_deleted_on_another_node_are_followed(
    make_runtime: Make, store: Store
) -> None:
    clock = ManualClock(T0)
    worker = make_runtime(AGENTS, clock=clock)
    api = make_runtime(AGENTS, clock=clock)
    await worker.start()
    await api.start(worker=False)
    assert api._scheduler is None  # an API-only node fires nothing
    schedule = minutely()
    await api.add_schedule(schedule)
    await move(clock, 30, worker)
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}"]
    await api.delete_schedule(schedule.id)
    await move(clock, 60, worker)
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}"]
    assert await worker.schedules() == []
    await all_settled(worker, store)


async def test_adding_listing_and_deleting(make_runtime: Make, store: Store) -> None:
    clock = ManualClock(T0)
    configured = minutely(id="heartbeat")
    runtime = make_runtime(AGENTS, clock=clock, schedules=[configured])
    await runtime.start()
    daily = Schedule("echo", "acme", cron="30 7 * * *", timezone="Europe/Paris", body="hi")
    added = await runtime.add_schedule(daily)
    assert await runtime.add_schedule(daily) == added  # the same definition: the one kept
    listed = await runtime.schedules()
    assert [(i.id, i.source) for i in listed] == [("heartbeat", "config"), (daily.id, "durable")]
    assert listed[1].schedule == daily
    assert listed[1].next_fire_at == datetime(2026, 1, 6, 6, 30, tzinfo=UTC)
    other = Schedule("echo", "acme", every=10, body="other", id=daily.id)
    with pytest.raises(ScheduleConflict, match="another definition"):
        await runtime.add_schedule(other)
    with pytest.raises(ScheduleConflict, match="configuration"):
        await runtime.add_schedule(minutely(id="heartbeat", session="else"))
    with pytest.raises(UnknownAgent):
        await runtime.add_schedule(Schedule("nobody", "acme", every=10, body="x"))
    with pytest.raises(ScheduleConflict, match="configuration"):
        await runtime.delete_schedule("heartbeat")
    with pytest.raises(ScheduleNotFound):
        await runtime.delete_schedule("nope")
    await runtime.delete_schedule(daily.id)
    assert [i.id for i in await runtime.schedules()] == ["heartbeat"]


def test_a_configuration_names_known_agents_and_distinct_ids() -> None:
    with pytest.raises(UnknownAgent):
        Runtime(AGENTS, MemoryStore(), schedules=[Schedule("x", "y", every=5, body="b")])
    with pytest.raises(ValueError, match="two schedules"):
        Runtime(AGENTS, MemoryStore(), schedules=[minutely(id="a"), minutely(id="a", body="2")])
    with pytest.raises(ValueError, match="schedule_poll"):
        Runtime(AGENTS, MemoryStore(), schedule_poll=0)


async def test_close_stops_the_scheduler(make_runtime: Make) -> None:
    runtime = make_runtime(AGENTS, clock=ManualClock(T0), schedules=[minutely()])
    await runtime.start()
    task = scheduler(runtime)._task
    assert task is not None and not task.done()
    await runtime.close()
    assert task.done()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "tether-scheduler"]


async def test_a_window_that_cannot_be_admitted_is_tried_again(
    make_runtime: Make, caplog: pytest.LogCaptureFixture
) -> None:
    """A store failure leaves the window due: the next pass admits it."""
    clock = ManualClock(T0)
    schedule = minutely()
    runtime = make_runtime(AGENTS, clock=clock, schedules=[schedule])
    await runtime.start()
    store = runtime.store
    passes = scheduler(runtime)
    await passes.stop()  # the test's passes only
    real = passes.dispatch
    failures = [StoreUnavailable("down for a moment")]

    async def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return await real(*args, **kwargs)

    passes.dispatch = flaky
    with caplog.at_level(logging.WARNING, logger="tether.engine"):
        await move(clock, 30, runtime)
    assert "not admitted yet: down for a moment" in caplog.text
    assert await fired(store) == []
    await move(clock, 1, runtime)
    assert await fired(store) == [f"{schedule.id}:{at(8, 59)}"]
    await all_settled(runtime, store)


# --- storms -------------------------------------------------------------------------------

STORM = {"every": 0.001, "missed": "catch_up", "catchUp": 1000}
"""Issue 36: from one POST, a thousand windows a second, each pass catching up a thousand."""


async def test_one_schedule_cannot_admit_a_storm(
    make_runtime: Make, store: CompleteStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A period under the runtime's floor (``schedule_min_period``, 1 s) is refused where a
    schedule is defined, in code as over HTTP; one kept in the store by an older version (or
    a node with a lower floor) does not fire here; and a schedule at the floor with the most
    catch-up admits the cap once, then one window a period."""
    with pytest.raises(InvalidSchedule, match="schedule_min_period") as raised:
        Runtime(AGENTS, MemoryStore(), schedules=[Schedule("echo", "a", every=0.001, body="b")])
    assert raised.value.field == "every"
    clock = ManualClock(T0)
    runtime = make_runtime(AGENTS, clock=clock)
    with pytest.raises(InvalidSchedule, match="schedule_min_period"):
        await runtime.add_schedule(Schedule("echo", "acme", every=0.5, body="b"))
    kept = {"id": "storm", "agent": "echo", "instance": "acme", "body": "b", **STORM}
    await store.put_schedule(ScheduleRow("storm", kept, T0 - timedelta(hours=1)))
    await runtime.start()
    with caplog.at_level(logging.WARNING, logger="tether.engine"):
        for _ in range(20):
            await move(clock, 0.25, runtime)
    assert await fired(store) == []
    assert "schedule storm cannot be read" in caplog.text
    assert [info.id for info in await runtime.schedules()] == []

    floor = Schedule("echo", "acme", every=1, body="b", missed="catch_up", catch_up=MAX_CATCH_UP)
    await runtime.delete_schedule("storm")
    other = make_runtime(AGENTS, clock=clock, schedules=[floor])
    await other.start()
    await move(clock, 0, other)
    assert len(await fired(store)) == MAX_CATCH_UP + 1  # the latest missed ones, and the latest
    for _ in range(40):  # ten seconds, four passes a second
        await move(clock, 0.25, other)
    assert len(await fired(store)) == MAX_CATCH_UP + 1 + 10


async def test_the_floor_is_the_runtimes_to_set(make_runtime: Make) -> None:
    fast = Schedule("echo", "acme", every=0.5, body="b")
    runtime = make_runtime(AGENTS, clock=ManualClock(T0), schedule_min_period=0.25)
    assert (await runtime.add_schedule(fast)).schedule == fast
    with pytest.raises(InvalidSchedule, match=r"at least 0\.25 s"):
        await runtime.add_schedule(Schedule("echo", "acme", every=0.1, body="b"))
    with pytest.raises(ValueError, match="schedule_min_period"):
        Runtime(AGENTS, MemoryStore(), schedule_min_period=0)
