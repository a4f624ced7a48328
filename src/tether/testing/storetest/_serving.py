"""Conformance cases for versioned claims (``serves`` on ``claim``, ``claim_runnable`` and
``admit_and_claim``): which heads a worker that serves some agent versions may take, and the
version a claim stamps. Part of the core: every store filters its claims."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tether.errors import ClaimLost
from tether.store import ClaimedHead, SubmissionStatus, VersionsServed
from tether.testing.storetest._base import T0, BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("ServingCases",)

V2_V1: VersionsServed = {"support": ["v2", "v1"]}


async def _claim_runnable(
    store: CompleteStore, fx: Fixtures, count: int, serves: VersionsServed | None
) -> list[ClaimedHead]:
    return await store.claim_runnable(
        attempt_ids=[fx.id("att") for _ in range(count)],
        owner_id="owner-1",
        lease_expires_at=fx.at(60),
        now=fx.at(0),
        serves=serves,
    )


class ServingCases(BaseConformance):
    @case
    async def test_a_versioned_claim_stamps_the_newest_version_served(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """An unversioned head is stamped with the first version listed, in the claim; a
        later claim keeps a version its worker lists, whatever the order."""
        submission = await fx.admit()
        assert submission.version is None
        claimed = await fx.claim(submission, serves=V2_V1)
        assert (claimed.status, claimed.version) == (SubmissionStatus.RUNNING, "v2")
        assert (await store.get_submission(submission.id)).version == "v2"
        await store.release(submission.id, attempt_id=str(claimed.attempt_id))
        again = await fx.claim(submission, serves={"support": ["v3", "v2"]})
        assert again.version == "v2"  # listed: a started run keeps its version

    @case
    async def test_a_head_on_an_unserved_version_is_claim_lost(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A head whose version its worker does not list, or of an agent it does not serve,
        is not claimed: ``ClaimLost``, and the submission is as it was."""
        submission = await fx.admit()
        first = await fx.claim(submission, serves={"support": ["v1"]})
        parked = await store.release(submission.id, attempt_id=str(first.attempt_id))
        for serves in ({"support": ["v2"]}, {"other": ["v1"]}, {}):
            with pytest.raises(ClaimLost):
                await fx.claim(submission, serves=serves)
        assert await store.get_submission(submission.id) == parked
        assert len(await store.list_attempts(submission.id)) == 1
        other = await fx.admit("elsewhere", agent="other")
        with pytest.raises(ClaimLost):
            await fx.claim(other, serves=V2_V1)
        assert (await store.get_submission(other.id)).status is SubmissionStatus.QUEUED

    @case
    async def test_the_wildcard_takes_any_version_onto_the_newest(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``"*"`` makes any version of its agent claimable; a version matched only by it is
        stamped with the first one listed (the run is taken over onto the new code), a
        listed one kept."""
        submission = await fx.admit()
        first = await fx.claim(submission, serves={"support": ["v1"]})
        await store.release(submission.id, attempt_id=str(first.attempt_id))
        kept = await fx.claim(submission, serves={"support": ["v2", "v1", "*"]})
        assert kept.version == "v1"
        await store.release(submission.id, attempt_id=str(kept.attempt_id))
        upgraded = await fx.claim(submission, serves={"support": ["v3", "*"]})
        assert upgraded.version == "v3"

    @case
    async def test_a_claim_without_serves_takes_any_version_and_stamps_none(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``serves=None`` is the claim as it always was: no filter, no stamp."""
        plain = await fx.claim(await fx.admit("a"))
        assert plain.status is SubmissionStatus.RUNNING and plain.version is None
        versioned = await fx.admit("b")
        first = await fx.claim(versioned, serves={"support": ["v1"]})
        await store.release(versioned.id, attempt_id=str(first.attempt_id))
        again = await fx.claim(versioned)
        assert again.status is SubmissionStatus.RUNNING and again.version == "v1"
        other = await fx.admit("c", agent="other")
        heads = await _claim_runnable(store, fx, 5, None)
        assert [(h.submission.id, h.submission.version) for h in heads] == [(other.id, None)]

    @case
    async def test_claim_runnable_passes_over_heads_it_cannot_serve(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A batch claim takes only the heads its worker serves, stamping each; a head it
        cannot serve is skipped, never keeps later heads of other sessions from it, and is
        not counted against the batch."""
        pinned = await fx.admit("pinned")
        first = await fx.claim(pinned, serves={"support": ["v1"]})
        await store.release(pinned.id, attempt_id=str(first.attempt_id))
        foreign = await fx.admit("foreign", agent="other")
        fresh = await fx.admit("fresh")
        later = await fx.admit("later")
        heads = await _claim_runnable(store, fx, 2, {"support": ["v2"]})
        assert [(h.submission.id, h.submission.version) for h in heads] == [
            (fresh.id, "v2"),
            (later.id, "v2"),
        ]
        assert await _claim_runnable(store, fx, 2, {"support": ["v2"]}) == []
        assert await _claim_runnable(store, fx, 2, {}) == []
        rest = await _claim_runnable(store, fx, 3, {"support": ["v1"], "other": ["o1"]})
        assert [(h.submission.id, h.submission.version) for h in rest] == [
            (pinned.id, "v1"),
            (foreign.id, "o1"),
        ]

    @case
    async def test_malformed_serves_is_a_value_error(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """An agent with no versions, a version that is no string or empty, and ``"*"``
        first (a claim stamps the first) are refused before anything is written."""
        submission = await fx.admit()
        bad: list[object] = [
            {"support": []},
            {"support": ["*", "v1"]},
            {"support": "v1"},
            {"support": [""]},
            {"": ["v1"]},
        ]
        for serves in bad:
            with pytest.raises(ValueError):
                await fx.claim(submission, serves=serves)  # type: ignore[arg-type]
            with pytest.raises(ValueError):
                await _claim_runnable(store, fx, 1, serves)  # type: ignore[arg-type]
        assert await store.get_submission(submission.id) == submission

    @needs("admit_and_claim")
    @case
    async def test_admit_and_claim_claims_only_what_it_serves(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """The admitting worker claims its new submission with ``serves`` as ``claim`` would:
        stamped when served, left queued (unversioned) for another worker otherwise."""

        async def admit_and_claim(agent: str, session: str) -> tuple[SubmissionStatus, str | None]:
            admitted = await store.admit_and_claim(
                fx.new(session, agent=agent),
                attempt_id=fx.id("att"),
                owner_id="owner-1",
                lease_expires_at=T0 + timedelta(seconds=60),
                now=T0,
                serves=V2_V1,
            )
            return admitted.submission.status, admitted.submission.version

        assert await admit_and_claim("support", "a") == (SubmissionStatus.RUNNING, "v2")
        assert await admit_and_claim("other", "b") == (SubmissionStatus.QUEUED, None)
        with pytest.raises(ValueError):
            await store.admit_and_claim(
                fx.new("c"),
                attempt_id=fx.id("att"),
                owner_id="owner-1",
                lease_expires_at=T0 + timedelta(seconds=60),
                now=T0,
                serves={"support": []},
            )
        assert len(await store.list_submissions()) == 2
