"""Conformance cases for timers (capability ``timers``): a delayed dispatch is admitted
``scheduled`` with its due time, is never claimed nor claimed at admission, holds its
session's later submissions behind it, is released to ``queued`` once due (each once), and
a cancel queues it at once; once due, it is claimed in its turn from its due time;
``next_due`` says when the earliest scheduled or timed wait is."""

from __future__ import annotations

import asyncio

from tether.store import WAIT_FOR_TIMER, SubmissionStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("TimerCases",)


@needs("timers")
class TimerCases(BaseConformance):
    @case
    async def test_a_delayed_dispatch_is_scheduled_until_due(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        later = await fx.admit(run_at=fx.at(60))
        assert later.status is SubmissionStatus.SCHEDULED
        assert later.wait_until == fx.at(60)
        assert (await store.get_submission(later.id)) == later
        assert [s.id for s in await store.list_submissions(SubmissionStatus.SCHEDULED)] == [
            later.id
        ]
        assert [s.id for s in await store.list_submissions(unsettled=True)] == [later.id]
        claimed = await store.claim_runnable(
            attempt_ids=["att-1"], owner_id="w", lease_expires_at=fx.at(120), now=fx.at(61)
        )
        assert claimed == []  # not queued: never claimed, due or not, until released
        assert await store.release_due(fx.at(59)) == []
        [released] = await store.release_due(fx.at(60))
        assert released.id == later.id and released.status is SubmissionStatus.QUEUED
        assert await store.release_due(fx.at(10_000)) == []  # each at most once
        [head] = await store.claim_runnable(
            attempt_ids=["att-2"], owner_id="w", lease_expires_at=fx.at(120), now=fx.at(61)
        )
        assert head.submission.id == later.id

    @case
    async def test_a_scheduled_head_holds_its_session_behind_it(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        later = await fx.admit(run_at=fx.at(60))
        behind = await fx.admit()
        elsewhere = await fx.admit("other")
        heads = await store.claim_runnable(
            attempt_ids=["att-1", "att-2"], owner_id="w", lease_expires_at=fx.at(120), now=fx.at(0)
        )
        assert [head.submission.id for head in heads] == [elsewhere.id]
        assert (await store.get_submission(behind.id)).status is SubmissionStatus.QUEUED
        await store.release_due(fx.at(60))
        [head] = await store.claim_runnable(
            attempt_ids=["att-3", "att-4"], owner_id="w", lease_expires_at=fx.at(120), now=fx.at(0)
        )
        assert head.submission.id == later.id  # its session's order is kept

    @case
    async def test_a_scheduled_submission_behind_a_queued_head_holds_nothing_back(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        # The head of a session is its oldest unsettled submission; one scheduled behind it
        # is no reason to pass the head over (found by the state machine on PostgreSQL).
        first = await fx.admit()
        await fx.admit(run_at=fx.at(0))
        [head] = await store.claim_runnable(
            attempt_ids=["att-1"], owner_id="w", lease_expires_at=fx.at(120), now=fx.at(0)
        )
        assert head.submission.id == first.id
        assert head.alone  # nothing queued behind it: the scheduled one is not yet

    @case
    async def test_a_delayed_dispatch_waits_its_turn_from_when_it_came_due(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        # Its claim order (priorities' rank) counts from its due time, not its admission:
        # what was queued before it came due goes first, what came after goes after.
        later = await fx.admit("a", run_at=fx.at(60))
        before_due = await fx.admit("b", seconds=30)
        after_due = await fx.admit("c", seconds=90)
        await store.release_due(fx.at(100))
        heads = await store.claim_runnable(
            attempt_ids=["att-1", "att-2", "att-3"],
            owner_id="w",
            lease_expires_at=fx.at(200),
            now=fx.at(100),
        )
        assert [head.submission.id for head in heads] == [before_due.id, later.id, after_due.id]

    @case
    async def test_releases_are_in_admission_order_and_once_under_races(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        first = await fx.admit("a", run_at=fx.at(30))
        second = await fx.admit("b", run_at=fx.at(10))
        await fx.admit("c", run_at=fx.at(90))
        batches = await asyncio.gather(*(store.release_due(fx.at(60)) for _ in range(4)))
        released = [s.id for batch in batches for s in batch]
        assert sorted(released) == sorted([first.id, second.id])  # each once, in all
        assert [s.id for s in max(batches, key=len)][:2] in ([first.id, second.id], [first.id])

    @case
    async def test_a_cancel_queues_a_scheduled_submission_at_once(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        later = await fx.admit(run_at=fx.at(3600))
        cancelled = await store.request_cancel(later.id, now=fx.at(1))
        assert cancelled.status is SubmissionStatus.QUEUED
        assert cancelled.cancel_requested_at == fx.at(1)
        assert await store.release_due(fx.at(3600)) == []
        [head] = await store.claim_runnable(
            attempt_ids=["att-1"], owner_id="w", lease_expires_at=fx.at(120), now=fx.at(2)
        )
        assert head.submission.id == later.id  # its claim settles it, aborted

    @case
    async def test_a_delayed_dispatch_is_never_claimed_at_its_admission(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        admission = await store.admit_and_claim(
            fx.new(run_at=fx.at(60)),
            attempt_id="att-1",
            owner_id="w",
            lease_expires_at=fx.at(120),
            now=fx.at(0),
        )
        assert admission.created
        assert admission.submission.status is SubmissionStatus.SCHEDULED
        assert admission.submission.attempt_id is None

    @case
    async def test_a_replayed_delayed_dispatch_returns_the_original(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        later = await fx.admit(dispatch_id="d", run_at=fx.at(60))
        again = await store.admit(fx.new(dispatch_id="d", run_at=fx.at(90)))
        assert not again.created and again.submission == later

    @case
    async def test_next_due_is_the_earliest_scheduled_or_timed_wait(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        assert await store.next_due() is None
        await fx.admit("a", run_at=fx.at(300))
        assert await store.next_due() == fx.at(300)
        asleep = await fx.claim(await fx.admit("b"))
        await store.park(
            asleep.id,
            attempt_id=str(asleep.attempt_id),
            reason=WAIT_FOR_TIMER,
            wait_until=fx.at(120),
        )
        assert await store.next_due() == fx.at(120)
        untimed = await fx.claim(await fx.admit("c"))
        await store.park(untimed.id, attempt_id=str(untimed.attempt_id), reason="approval")
        assert await store.next_due() == fx.at(120)
        await store.unpark(asleep.id)  # queued: no longer waits for a time
        assert await store.next_due() == fx.at(300)
        await store.release_due(fx.at(300))
        assert await store.next_due() is None
