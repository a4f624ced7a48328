"""Conformance cases for ``admit_and_claim``: the admitting worker's one-commit claim."""

from __future__ import annotations

import pytest

from tether.errors import DispatchConflict
from tether.store import Admission, Store, SubmissionStatus
from tether.testing.storetest._base import BaseConformance, Fixtures, case

__all__ = ("AdmitAndClaimCases",)


class AdmitAndClaimCases(BaseConformance):
    @case
    async def test_admit_and_claim_claims_an_idle_sessions_head(
        self, store: Store, fx: Fixtures
    ) -> None:
        admission = await store.admit_and_claim(
            fx.new(),
            attempt_id="att-1",
            owner_id="owner-1",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
        )
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
        self, store: Store, fx: Fixtures
    ) -> None:
        first = await fx.admit()
        admission = await store.admit_and_claim(
            fx.new(),
            attempt_id="att-1",
            owner_id="owner-1",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
        )
        queued = admission.submission
        assert admission.created and queued.status is SubmissionStatus.QUEUED
        assert queued.attempt_id is None and queued.attempt_count == 0
        assert await store.list_attempts(queued.id) == []
        assert [s.id for s in await store.list_runnable()] == [first.id]
        # Nor beside a run of its session: a running head keeps the next one queued.
        running = await fx.claim(first)
        behind = await store.admit_and_claim(
            fx.new(),
            attempt_id="att-2",
            owner_id="owner-1",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
        )
        assert behind.submission.status is SubmissionStatus.QUEUED
        assert await store.list_submissions(SubmissionStatus.RUNNING) == [running]

    @case
    async def test_admit_and_claim_replays_without_claiming(
        self, store: Store, fx: Fixtures
    ) -> None:
        original = await fx.admit(dispatch_id="d1")
        replay = await store.admit_and_claim(
            fx.new(dispatch_id="d1"),
            attempt_id="att-1",
            owner_id="owner-1",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
        )
        assert replay == Admission(original, created=False)
        with pytest.raises(DispatchConflict):
            await store.admit_and_claim(
                fx.new(dispatch_id="d1", body="something else"),
                attempt_id="att-2",
                owner_id="owner-1",
                lease_expires_at=fx.at(60),
                now=fx.at(0),
            )
        assert await store.list_submissions() == [original]
        assert await store.list_attempts(original.id) == []
