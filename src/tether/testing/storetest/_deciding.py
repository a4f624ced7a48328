"""Conformance cases for ``GateStore.append_decision``: a decision and its wake-up in one commit."""

from __future__ import annotations

import pytest

from tether.errors import ClaimLost, Conflict, ConversationNotFound
from tether.store import Submission, SubmissionStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("DecisionCases",)


async def _parked(store: CompleteStore, fx: Fixtures) -> Submission:
    claimed = await fx.claim(await fx.admit())
    return await store.park(
        claimed.id,
        attempt_id=str(claimed.attempt_id),
        reason="approval",
        expected_seq=await store.head(claimed.conversation_id),
    )


@needs("gates")
class DecisionCases(BaseConformance):
    @case
    async def test_append_decision_wakes_the_waiting_submission(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        parked = await _parked(store, fx)
        assert parked.status is SubmissionStatus.WAITING
        cid = parked.conversation_id
        head = await store.head(cid)
        records = await store.append_decision(
            cid, [fx.draft("approved")], expected_seq=head, wake=parked.id
        )
        assert [r.seq for r in records] == [head + 1]
        assert await store.read(cid, after_seq=head) == records
        woken = await store.get_submission(parked.id)
        assert woken.status is SubmissionStatus.QUEUED and woken.attempt_count == 0
        assert [s.id for s in await store.list_runnable()] == [parked.id]
        assert await store.verify(cid) == head + 1

    @case
    async def test_append_decision_is_no_writers_turn(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A decision is appended at the conversation's current fence, whatever fence its
        writer holds: it supersedes no one (the holder of the current fence appends on) and
        no fence refuses it. A running attempt is left alone; its park finds the head moved."""
        claimed = await fx.claim(await fx.admit())
        cid = claimed.conversation_id
        head = await store.head(cid)
        await store.append_decision(cid, [fx.draft("decided")], expected_seq=head, wake=claimed.id)
        await store.append(cid, [fx.draft()], expected_seq=head + 1, fence=claimed.fence)
        assert await store.mint_fence(cid) == claimed.fence + 1
        await store.append_decision(cid, [fx.draft()], expected_seq=head + 2, wake=None)
        assert (await store.get_submission(claimed.id)).status is SubmissionStatus.RUNNING
        requeued = await store.park(
            claimed.id, attempt_id=str(claimed.attempt_id), reason="approval", expected_seq=head
        )
        assert requeued.status is SubmissionStatus.QUEUED and requeued.attempt_count == 0

    @case
    async def test_append_decision_refused_writes_and_wakes_nothing(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        parked = await _parked(store, fx)
        cid = parked.conversation_id
        log = await store.read(cid)
        with pytest.raises(Conflict):
            await store.append_decision(
                cid, [fx.draft()], expected_seq=len(log) - 1, wake=parked.id
            )
        assert await store.read(cid) == log
        assert await store.get_submission(parked.id) == parked
        with pytest.raises(ConversationNotFound):
            await store.append_decision("conv-absent", [fx.draft()], expected_seq=1, wake=None)

    @case
    async def test_append_decision_leaves_other_statuses_alone(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Only a waiting submission is woken; a queued, running or settled one, or an
        unknown id, is left as it is, and the decision is written all the same."""
        queued = await fx.admit("session-q")
        running = await fx.claim(await fx.admit("session-r"))
        for submission in (queued, running):
            cid = submission.conversation_id
            head = await store.head(cid)
            await store.append_decision(cid, [fx.draft()], expected_seq=head, wake=submission.id)
            after = await store.get_submission(submission.id)
            assert after.status is submission.status
            assert after.attempt_id == submission.attempt_id
        cid = queued.conversation_id
        await store.append_decision(
            cid, [fx.draft()], expected_seq=await store.head(cid), wake="sub-absent"
        )
        assert await store.verify(cid) == 3
        with pytest.raises(ClaimLost):
            await store.unpark(queued.id)
