"""Conformance cases for ``admit_and_claim``: the admitting worker's one-commit claim."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tether.errors import DispatchConflict
from tether.store import (
    Admission,
    ClaimSlots,
    LimitAsk,
    NewSubmission,
    Submission,
    SubmissionStatus,
)
from tether.testing.storetest._base import T0, BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("AdmitAndClaimCases",)


async def _admit_and_claim(
    store: CompleteStore, new: NewSubmission, attempt_id: str, slots: ClaimSlots | None = None
) -> Admission:
    return await store.admit_and_claim(
        new,
        attempt_id=attempt_id,
        owner_id="owner-1",
        lease_expires_at=T0 + timedelta(seconds=60),
        now=T0,
        slots=slots,
    )


@needs("admit_and_claim")
class AdmitAndClaimCases(BaseConformance):
    @case
    async def test_admit_and_claim_claims_an_idle_sessions_head(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        admission = await _admit_and_claim(store, fx.new(), "att-1")
        claimed = admission.submission
        assert admission.created and claimed.status is SubmissionStatus.RUNNING
        assert (claimed.attempt_id, claimed.owner_id, claimed.attempt_count) == (
            "att-1",
            "owner-1",
            1,
        )
        assert claimed.lease_expires_at == fx.at(60) and claimed.fence >= 1
        assert await store.get_submission(claimed.id) == claimed
        [attempt] = await store.list_attempts(claimed.id)
        assert (attempt.id, attempt.number, attempt.fence) == ("att-1", 1, claimed.fence)
        assert await store.list_runnable() == []

    @case
    async def test_admit_and_claim_leaves_a_later_submission_queued(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        first = await fx.admit()
        admission = await _admit_and_claim(store, fx.new(), "att-1")
        queued = admission.submission
        assert admission.created and queued.status is SubmissionStatus.QUEUED
        assert queued.attempt_id is None and queued.attempt_count == 0
        assert await store.list_attempts(queued.id) == []
        assert [s.id for s in await store.list_runnable()] == [first.id]
        # Nor beside a run of its session: a running head keeps the next one queued.
        running = await fx.claim(first)
        behind = await _admit_and_claim(store, fx.new(), "att-2")
        assert behind.submission.status is SubmissionStatus.QUEUED
        assert await store.list_submissions(SubmissionStatus.RUNNING) == [running]

    @case
    async def test_admit_and_claim_replays_without_claiming(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        original = await fx.admit(dispatch_id="d1")
        replay = await _admit_and_claim(store, fx.new(dispatch_id="d1"), "att-1")
        assert replay == Admission(original, created=False)
        with pytest.raises(DispatchConflict):
            await _admit_and_claim(store, fx.new(dispatch_id="d1", body="something else"), "att-2")
        assert await store.list_submissions() == [original]
        assert await store.list_attempts(original.id) == []

    @case
    @needs("limits")
    async def test_admit_and_claim_takes_the_runs_slots_or_leaves_it_queued(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """With ``slots``, the claim at admission takes the run's slots in its commit (their
        holder its attempt), after giving back the slots of runs that ended; a run whose
        slots are taken by others stays queued, holding none; so does one behind its
        session's head, whose slots are not kept."""

        def asks(submission: Submission) -> list[LimitAsk]:
            holder = str(submission.attempt_id)
            return [LimitAsk("agent:" + submission.key.agent, holder, "owner-1", fx.at(30), 1)]

        first = await _admit_and_claim(store, fx.new("s1"), "att-1", ClaimSlots(asks))
        assert first.submission.status is SubmissionStatus.RUNNING
        assert await store.limit_slots("agent:", now=T0) == {
            "agent:" + first.submission.key.agent: 1
        }
        held = await _admit_and_claim(store, fx.new("s2"), "att-2", ClaimSlots(asks))
        assert held.created and held.submission.status is SubmissionStatus.QUEUED
        assert await store.list_attempts(held.submission.id) == []
        key = "agent:" + first.submission.key.agent
        ended = ClaimSlots(asks, give_back=[(key, "att-1")])
        behind = await _admit_and_claim(store, fx.new("s1"), "att-3", ended)
        assert behind.submission.status is SubmissionStatus.QUEUED  # behind s1's head
        assert await store.limit_slots("agent:", now=T0) == {}  # att-1's given back
        third = await _admit_and_claim(store, fx.new("s3"), "att-4", ClaimSlots(asks))
        assert third.submission.status is SubmissionStatus.RUNNING
        assert await store.limit_slots("agent:", now=T0) == {key: 1}
