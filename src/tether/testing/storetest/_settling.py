"""Conformance cases for ``Store.append_settled``: an append and a settlement in one commit."""

from __future__ import annotations

import pytest

from tether.errors import ClaimLost, Conflict, Fenced
from tether.records import Record
from tether.store import ClaimSettlement, Submission, SubmissionStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case

__all__ = ("SettlementCases",)

PAYLOAD = {"status": "succeeded", "result": {"answer": 42, "ratio": 0.5}}


def _settle(claimed: Submission, fx: Fixtures, *, attempt_id: str | None = None) -> ClaimSettlement:
    return ClaimSettlement(
        submission_id=claimed.id,
        attempt_id=attempt_id or str(claimed.attempt_id),
        settlement=PAYLOAD,
        settled_at=fx.at(7),
    )


async def _unchanged(store: CompleteStore, claimed: Submission, log: list[Record]) -> None:
    """Nothing was written: the claim still runs and the log is as it was."""
    assert await store.get_submission(claimed.id) == claimed
    assert await store.read(claimed.conversation_id) == log


class SettlementCases(BaseConformance):
    @case
    async def test_append_settled_writes_both_at_once(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        claimed = await fx.claim(await fx.admit())
        later = await fx.admit()
        cid = claimed.conversation_id
        head = await store.head(cid)
        records = await store.append_settled(
            cid,
            [fx.draft("the end"), fx.draft("settled")],
            expected_seq=head,
            fence=claimed.fence,
            settle=_settle(claimed, fx),
        )
        assert [r.seq for r in records] == [head + 1, head + 2]
        assert await store.read(cid, after_seq=head) == records
        settled = await store.get_submission(claimed.id)
        assert settled.status is SubmissionStatus.SETTLED
        assert settled.settlement == PAYLOAD and settled.settled_at == fx.at(7)
        assert settled.lease_expires_at is None
        # The two-phase path's last step finds it done; the session's next submission is up.
        assert await store.finalize_settlement(claimed.id, now=fx.at(9)) == settled
        assert [s.id for s in await store.list_runnable()] == [later.id]
        assert await store.verify(cid) == head + 2

    @case
    async def test_append_settled_needs_the_owning_attempt(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """ClaimLost is checked first, before the head and the fence; nothing is written."""
        claimed = await fx.claim(await fx.admit())
        cid = claimed.conversation_id
        log = await store.read(cid)
        with pytest.raises(ClaimLost):
            await store.append_settled(
                cid,
                [fx.draft()],
                expected_seq=len(log) + 5,  # stale too: the claim is what is reported
                fence=claimed.fence,
                settle=_settle(claimed, fx, attempt_id="att-stale"),
            )
        await _unchanged(store, claimed, log)
        await fx.fill(cid, 1, fence=claimed.fence)  # this store now knows the head
        log = await store.read(cid)
        with pytest.raises(ClaimLost):
            await store.append_settled(
                cid,
                [fx.draft()],
                expected_seq=len(log),
                fence=claimed.fence,
                settle=_settle(claimed, fx, attempt_id="att-stale"),
            )
        await _unchanged(store, claimed, log)
        queued = await fx.admit("session-b")
        with pytest.raises(ClaimLost):
            await store.append_settled(
                queued.conversation_id,
                [fx.draft()],
                expected_seq=1,
                fence=0,
                settle=_settle(queued, fx, attempt_id="att-none"),
            )
        assert (await store.get_submission(queued.id)).status is SubmissionStatus.QUEUED
        assert await store.head(queued.conversation_id) == 1

    @case
    async def test_append_settled_refused_by_the_log_settles_nothing(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        claimed = await fx.claim(await fx.admit())
        cid = claimed.conversation_id
        await fx.fill(cid, 2, fence=claimed.fence)
        log = await store.read(cid)
        with pytest.raises(Conflict):
            await store.append_settled(
                cid,
                [fx.draft()],
                expected_seq=len(log) - 1,
                fence=claimed.fence,
                settle=_settle(claimed, fx),
            )
        await _unchanged(store, claimed, log)
        await store.mint_fence(cid)  # superseded by a newer writer
        with pytest.raises(Fenced):
            await store.append_settled(
                cid,
                [fx.draft()],
                expected_seq=len(log),
                fence=claimed.fence,
                settle=_settle(claimed, fx),
            )
        await _unchanged(store, claimed, log)
        # With the claim and the log both in order again, it goes through.
        await store.append_settled(
            cid,
            [fx.draft()],
            expected_seq=len(log),
            fence=claimed.fence + 1,
            settle=_settle(claimed, fx),
        )
        assert (await store.get_submission(claimed.id)).status is SubmissionStatus.SETTLED
