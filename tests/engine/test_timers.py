"""Durable timers: a run sleeps (``Turn.sleep``, ``Turn.sleep_until``) parked without a lease,
and the engine wakes it at its time, once; a delayed dispatch (``run_at``, ``after``) waits
``scheduled`` and is queued at its time, in its session's order, and an abort settles it
without running it. All on the manual clock: time passes only when the test moves it."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import JsonValue

from tether.engine import ManualClock, Runtime
from tether.errors import InvalidDispatch
from tether.journal import Journal, JournalHooks, Turn
from tether.records import StepRecorded
from tether.store import WAIT_FOR_TIMER, Store, SubmissionStatus

from .agents import agent, echo_agent
from .test_control import wait_for_status
from .test_runtime import settle
from .waits import advance_until

Make = Callable[..., Runtime]

WEEK = timedelta(days=7)


class Sleeper:
    """Counts its live starts, sleeps a week, then answers with what it was sent."""

    name, version = "sleeper", "1"

    def __init__(self) -> None:
        self.before = 0
        self.after = 0

    async def run(self, turn: Turn) -> JsonValue:
        self.before += 1
        await turn.sleep(WEEK)
        self.after += 1
        return f"woke: {turn.inputs[-1].text}"


async def test_a_sleep_parks_without_a_lease_and_wakes_at_its_time_once(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    sleeper = Sleeper()
    start = clock.now()
    async with make_runtime({"nap": agent(sleeper)}) as runtime:
        receipt = await runtime.dispatch("nap", "acme", "hello")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        parked = await store.get_submission(receipt.submission_id)
        assert parked.wait_reason == WAIT_FOR_TIMER
        assert parked.wait_until == start + WEEK
        assert parked.attempt_id is None and parked.lease_expires_at is None
        await clock.advance(WEEK.total_seconds() - 1)  # a second early: still asleep
        assert (await store.get_submission(receipt.submission_id)).status is (
            SubmissionStatus.WAITING
        )
        await clock.advance(1)  # its time, and no more: it fires without more time passing
        settled = await settle(runtime, receipt.submission_id)
        assert settled.get("result") == "woke: hello", settled
        assert clock.now() == start + WEEK
        assert (sleeper.before, sleeper.after) == (2, 1)  # resumed once, from the log
        records = await runtime.records(receipt.conversation_id)
        steps = [r.payload for r in records if isinstance(r.payload, StepRecorded)]
        assert [(s.name, s.value) for s in steps] == [
            ("tether.sleep", {"timer": "sleep-1", "until": (start + WEEK).isoformat()}),
            ("tether.woke", {"timer": "sleep-1"}),
        ]


async def test_a_replayed_sleep_returns_at_once_and_asks_no_time(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    async with make_runtime({"nap": agent(Sleeper())}) as runtime:
        receipt = await runtime.dispatch("nap", "acme", "hello")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        await clock.advance(WEEK.total_seconds())
        settled = await advance_until(clock, settle(runtime, receipt.submission_id), 0.25)
        assert settled.get("result") == "woke: hello", settled
    asked: list[datetime] = []

    def now() -> datetime:
        asked.append(datetime.now(UTC))
        return asked[-1]

    journal = await Journal.open(store, receipt.conversation_id, hooks=JournalHooks(now=now))
    head = (await journal.refresh()).head
    assert await journal.replay(Sleeper()) == ["woke: hello"]
    assert asked == []  # no clock read, no wait: served from the log
    assert (await journal.refresh()).head == head


class SleepUntil:
    name, version = "sleep-until", "1"

    def __init__(self, when: datetime) -> None:
        self.when = when

    async def run(self, turn: Turn) -> JsonValue:
        await turn.sleep_until(self.when)
        return "done"


async def test_sleep_until_a_past_time_journals_and_goes_on(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    async with make_runtime({"nap": agent(SleepUntil(clock.now() - WEEK))}) as runtime:
        receipt = await runtime.dispatch("nap", "acme", "hello")
        assert (await settle(runtime, receipt.submission_id))["result"] == "done"
        records = await runtime.records(receipt.conversation_id)
        names = [r.payload.name for r in records if isinstance(r.payload, StepRecorded)]
        assert names == ["tether.sleep", "tether.woke"]


async def test_an_abort_wakes_a_sleeping_run_to_settle_aborted(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    async with make_runtime({"nap": agent(Sleeper())}) as runtime:
        receipt = await runtime.dispatch("nap", "acme", "hello")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        await runtime.abort_submission(receipt.submission_id)
        assert (await settle(runtime, receipt.submission_id))["status"] == "aborted"


async def test_a_delayed_dispatch_is_scheduled_then_runs_in_its_sessions_order(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    start = clock.now()
    async with make_runtime({"echo": echo_agent()}) as runtime:
        later = await runtime.dispatch("echo", "acme", "first", after=60)
        behind = await runtime.dispatch("echo", "acme", "second")
        other = await runtime.dispatch("echo", "acme", "elsewhere", session="s2")
        assert (await settle(runtime, other.submission_id))["result"] == "echo: elsewhere"
        scheduled = await store.get_submission(later.submission_id)
        assert scheduled.status is SubmissionStatus.SCHEDULED
        assert scheduled.wait_until == start + timedelta(seconds=60)
        assert (await store.get_submission(behind.submission_id)).status is (
            SubmissionStatus.QUEUED  # held behind its session's scheduled head
        )
        await clock.advance(59)
        assert (await store.get_submission(later.submission_id)).status is (
            SubmissionStatus.SCHEDULED
        )
        await clock.advance(1)  # its time, and no more: the claim loop slept until then
        first = await settle(runtime, later.submission_id)
        assert first["result"] == "echo: first"
        assert (await settle(runtime, behind.submission_id))["result"] == "echo: second"
        assert clock.now() == start + timedelta(seconds=60)
        first_settled = (await store.get_submission(later.submission_id)).settled_at
        second_settled = (await store.get_submission(behind.submission_id)).settled_at
        assert first_settled is not None and second_settled is not None
        assert first_settled <= second_settled


async def test_run_at_is_a_time_and_a_replay_of_the_dispatch_keeps_its_time(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    at = clock.now() + timedelta(hours=2)
    async with make_runtime({"echo": echo_agent()}) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hi", run_at=at, dispatch_id="d1")
        again = await runtime.dispatch("echo", "acme", "hi", run_at=at, dispatch_id="d1")
        assert again.submission_id == receipt.submission_id and not again.created
        submission = await store.get_submission(receipt.submission_id)
        assert submission.status is SubmissionStatus.SCHEDULED and submission.wait_until == at
        info = await runtime.submission(receipt.submission_id)
        assert info.status is SubmissionStatus.SCHEDULED


async def test_an_abort_settles_a_scheduled_dispatch_without_running_it(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    sleeper = Sleeper()
    async with make_runtime({"nap": agent(sleeper)}) as runtime:
        receipt = await runtime.dispatch("nap", "acme", "hello", after=WEEK)
        await runtime.abort_submission(receipt.submission_id)
        settled = await settle(runtime, receipt.submission_id)
        assert settled["status"] == "aborted"
        assert sleeper.before == 0  # never ran
        assert (await store.get_submission(receipt.submission_id)).status is (
            SubmissionStatus.SETTLED
        )


@pytest.mark.parametrize(
    ("run_at", "after", "field"),
    [
        (timedelta(hours=1), 60.0, "runAt"),  # both
        (-timedelta(seconds=1), None, "runAt"),  # past
        (timedelta(days=4000), None, "runAt"),  # absurd
        (None, -1.0, "afterSeconds"),
        (None, float("nan"), "afterSeconds"),
        (None, 4000 * 86400.0, "afterSeconds"),
    ],
)
async def test_a_bad_delay_is_refused_with_nothing_written(
    make_runtime: Make,
    store: Store,
    clock: ManualClock,
    run_at: timedelta | None,
    after: float | None,
    field: str,
) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        with pytest.raises(InvalidDispatch) as refused:
            await runtime.dispatch(
                "echo",
                "acme",
                "hi",
                run_at=None if run_at is None else clock.now() + run_at,
                after=after,
            )
        assert refused.value.field == field
        assert await store.list_submissions() == []


async def test_a_naive_run_at_and_a_delayed_steer_are_refused(
    make_runtime: Make, store: Store
) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        with pytest.raises(InvalidDispatch):
            await runtime.dispatch("echo", "acme", "hi", run_at=datetime(2030, 1, 1))
        with pytest.raises(InvalidDispatch):
            await runtime.dispatch("echo", "acme", "hi", after=5, multitask="interrupt")
        assert await store.list_submissions() == []


async def test_a_delay_admitted_by_a_worker_now_gone_fires_on_another_at_its_time(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """The worker that admitted it is closed: the other learns the due time from the store
    (its sweep asks ``next_due``), not from the admission, and fires it at that time."""
    start = clock.now()
    async with make_runtime({"echo": echo_agent()}) as survivor:
        gone = make_runtime({"echo": echo_agent()})
        async with gone:
            receipt = await gone.dispatch("echo", "acme", "later", after=60)
        await clock.advance(59)
        assert (await store.get_submission(receipt.submission_id)).status is (
            SubmissionStatus.SCHEDULED
        )
        await clock.advance(1)  # its time
        # Fired at its time, or at the latest by the survivor's next sweep: on a loaded machine
        # the sweep that learns the due time can finish after time reached it, and a manual
        # clock moves only when told (the spec is "within a second of its time").
        settled = await advance_until(clock, settle(survivor, receipt.submission_id), 0.05)
        assert settled["result"] == "echo: later"
        assert clock.now() <= start + timedelta(seconds=61)
        assert len(await store.list_attempts(receipt.submission_id)) == 1
