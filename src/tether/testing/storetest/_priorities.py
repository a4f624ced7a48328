"""Conformance cases for priorities: claims take the queued session heads by ``claim_rank``
(admission time, ``priority`` agings earlier), ties in admission order, while a session's
own submissions keep their order. Part of the core: every store orders its claims."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tether.store import PRIORITY_MAX, PRIORITY_MIN, SubmissionStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case

__all__ = ("PriorityCases",)

MINUTE = timedelta(minutes=1)


async def _claim_ids(store: CompleteStore, fx: Fixtures, count: int) -> list[str]:
    heads = await store.claim_runnable(
        attempt_ids=[fx.id("att") for _ in range(count)],
        owner_id="owner-1",
        lease_expires_at=fx.at(3600),
        now=fx.at(0),
    )
    return [head.submission.id for head in heads]


class PriorityCases(BaseConformance):
    @case
    async def test_claims_take_higher_priority_heads_first(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Admitted at one moment, heads are listed and claimed by priority, highest first,
        ties in admission order; each keeps its priority."""
        low = await fx.admit("low", priority=-5)
        plain = await fx.admit("plain")
        high = await fx.admit("high", priority=7)
        tie = await fx.admit("tie", priority=7)
        assert (low.priority, plain.priority, high.priority) == (-5, 0, 7)
        assert (await store.get_submission(high.id)).priority == 7
        order = [high.id, tie.id, plain.id, low.id]
        assert [s.id for s in await store.list_runnable()] == order
        assert await _claim_ids(store, fx, 2) == order[:2]
        assert await _claim_ids(store, fx, 5) == order[2:]

    @case
    async def test_a_sessions_own_submissions_keep_their_order_whatever_their_priority(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Only a session's head is claimable: a high-priority submission queued behind a
        low one of its session waits for it, and another session's head goes first."""
        head = await fx.admit("a", priority=-10)
        behind = await fx.admit("a", priority=PRIORITY_MAX)
        other = await fx.admit("b", priority=1)
        assert [s.id for s in await store.list_runnable()] == [other.id, head.id]
        assert await _claim_ids(store, fx, 5) == [other.id, head.id]
        assert (await store.get_submission(behind.id)).status is SubmissionStatus.QUEUED

    @case
    async def test_waiting_ages_a_low_priority_submission_ahead_of_newer_high_ones(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Each ``aging`` waited is worth one step of priority: priority 5 admitted four
        minutes after priority 0 goes first; admitted six minutes after, it goes second."""
        old = await fx.admit("old", priority=0, seconds=0, aging=MINUTE)
        sooner = await fx.admit("sooner", priority=5, seconds=4 * 60, aging=MINUTE)
        later = await fx.admit("later", priority=5, seconds=6 * 60, aging=MINUTE)
        assert await _claim_ids(store, fx, 3) == [sooner.id, old.id, later.id]

    @case
    async def test_a_released_head_keeps_its_place(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A retry goes back in line where its admission put it, not behind what came since."""
        first = await fx.admit("first", priority=3)
        (claimed,) = await _claim_ids(store, fx, 1)
        assert claimed == first.id
        later = await fx.admit("later", priority=1)
        attempt = (await store.get_submission(first.id)).attempt_id
        await store.release(first.id, attempt_id=str(attempt))
        assert [s.id for s in await store.list_runnable()] == [first.id, later.id]

    @case
    async def test_a_replay_keeps_the_first_admissions_priority(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Priority is not part of what makes a dispatch the same one: a replay with another
        returns the submission as first admitted."""
        first = await store.admit(fx.new("s", dispatch_id="d-1", priority=2))
        again = await store.admit(fx.new("s", dispatch_id="d-1", priority=9))
        assert not again.created and again.submission == first.submission
        assert again.submission.priority == 2

    @case
    async def test_a_priority_or_aging_out_of_range_is_refused_and_nothing_admitted(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        for bad in (PRIORITY_MIN - 1, PRIORITY_MAX + 1, True, 1.5):
            with pytest.raises(ValueError, match="priority"):
                await store.admit(fx.new("s", priority=bad))  # type: ignore[arg-type]
        for aging in (timedelta(0), -MINUTE, timedelta(days=2)):
            with pytest.raises(ValueError, match="aging"):
                await store.admit(fx.new("s", aging=aging))
        assert await store.list_submissions() == []
        edges = [await fx.admit(f"s{p}", priority=p) for p in (PRIORITY_MIN, PRIORITY_MAX)]
        assert [s.priority for s in edges] == [PRIORITY_MIN, PRIORITY_MAX]
