"""Conformance cases for parking (``WaitStore``, part of the ``gates`` and ``children``
capabilities): a run that waits holds no lease until it is woken."""

from __future__ import annotations

import pytest

from tether.errors import ClaimLost
from tether.store import SubmissionStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("ParkingCases",)


@needs("waits")
class ParkingCases(BaseConformance):
    """Parking and waking submissions."""

    @case
    async def test_park_and_unpark(self, store: CompleteStore, fx: Fixtures) -> None:
        claimed = await fx.claim(await fx.admit())
        with pytest.raises(ClaimLost):
            await store.park(claimed.id, attempt_id="att-stale", reason="approval")
        parked = await store.park(claimed.id, attempt_id=str(claimed.attempt_id), reason="approval")
        assert parked.status is SubmissionStatus.WAITING and parked.wait_reason == "approval"
        assert parked.lease_expires_at is None and parked.attempt_id is None
        assert (
            await store.list_runnable() == []
            and await store.list_expired_leases(fx.at(10**6)) == []
        )
        woken = await store.unpark(claimed.id)
        # What it waited for stays said until its next claim (a listing of decided gates).
        assert woken.status is SubmissionStatus.QUEUED and woken.wait_reason == "approval"
        with pytest.raises(ClaimLost):
            await store.unpark(claimed.id)
        assert [s.id for s in await store.list_runnable()] == [claimed.id]
        assert (await fx.claim(woken)).wait_reason is None

    @case
    async def test_a_park_refunds_the_attempt(self, store: CompleteStore, fx: Fixtures) -> None:
        """Waiting for a decision is not a failed attempt: however many times a submission
        parks, only the attempts that fail or are lost count against its budget."""
        submission = await fx.admit()
        for _ in range(4):
            claimed = await fx.claim(submission)
            assert claimed.attempt_count == 1
            parked = await store.park(
                claimed.id, attempt_id=str(claimed.attempt_id), reason="approval"
            )
            assert parked.status is SubmissionStatus.WAITING and parked.attempt_count == 0
            submission = await store.unpark(claimed.id)
        assert len(await store.list_attempts(submission.id)) == 4  # the markers stay

    @case
    async def test_a_park_after_the_head_moved_requeues(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A park is a CAS on the log: if the conversation's head moved past the head the
        attempt saw (its decision may be there already), the claim goes back to the queue,
        refunded, instead of waiting for a wake-up that has already happened."""
        claimed = await fx.claim(await fx.admit())
        cid = claimed.conversation_id
        seen = await store.head(cid)
        await store.append(cid, [fx.draft("decided")], expected_seq=seen, fence=claimed.fence)
        with pytest.raises(ClaimLost):  # ownership is still checked first
            await store.park(claimed.id, attempt_id="att-stale", reason="approval", expected_seq=0)
        requeued = await store.park(
            claimed.id, attempt_id=str(claimed.attempt_id), reason="approval", expected_seq=seen
        )
        assert requeued.status is SubmissionStatus.QUEUED and requeued.attempt_count == 0
        assert requeued.attempt_id is None and requeued.lease_expires_at is None
        assert [s.id for s in await store.list_runnable()] == [claimed.id]
        again = await fx.claim(requeued)
        parked = await store.park(
            again.id, attempt_id=str(again.attempt_id), reason="approval", expected_seq=seen + 1
        )
        assert parked.status is SubmissionStatus.WAITING and parked.attempt_count == 0

    @case
    async def test_a_park_with_a_cancel_requested_requeues(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        claimed = await fx.claim(await fx.admit())
        await store.request_cancel(claimed.id, now=fx.at(1))
        requeued = await store.park(
            claimed.id,
            attempt_id=str(claimed.attempt_id),
            reason="approval",
            expected_seq=await store.head(claimed.conversation_id),
        )
        assert requeued.status is SubmissionStatus.QUEUED
        assert requeued.cancel_requested_at == fx.at(1)

    @case
    async def test_request_cancel_requeues_a_waiting_submission(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Nothing a cancelled submission waits for will come: it is requeued in the same
        commit, and its next claim settles it."""
        claimed = await fx.claim(await fx.admit())
        behind = await fx.admit()
        await store.park(claimed.id, attempt_id=str(claimed.attempt_id), reason="approval")
        cancelled = await store.request_cancel(claimed.id, now=fx.at(1))
        assert cancelled.status is SubmissionStatus.QUEUED
        assert cancelled.cancel_requested_at == fx.at(1)
        assert [s.id for s in await store.list_runnable()] == [claimed.id]
        again = await store.request_cancel(claimed.id, now=fx.at(2))
        assert again == cancelled
        assert (await store.request_cancel(behind.id, now=fx.at(3))).status is (
            SubmissionStatus.QUEUED
        )
