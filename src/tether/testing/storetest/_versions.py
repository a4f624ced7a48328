"""Conformance cases for the ``versions`` capability (``VersionStore``): a submission's
version moved by CAS, the unsettled submissions counted by version, and the workers."""

from __future__ import annotations

import pytest

from tether.errors import SubmissionNotFound, VersionConflict
from tether.store import SubmissionStatus, VersionCount, WorkerRow
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("VersionCases",)


@needs("versions")
class VersionCases(BaseConformance):
    @case
    async def test_set_version_moves_a_queued_submission_by_cas(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """From the version the caller saw to another, once; a stale ``expected`` is a
        ``VersionConflict`` that says what is stored, and changes nothing."""
        submission = await fx.admit()
        moved = await store.set_version(submission.id, expected=None, version="v1")
        assert moved.version == "v1" and moved.status is SubmissionStatus.QUEUED
        assert await store.get_submission(submission.id) == moved
        with pytest.raises(VersionConflict) as stale:
            await store.set_version(submission.id, expected=None, version="v2")
        assert (stale.value.submission_id, stale.value.expected, stale.value.actual) == (
            submission.id,
            None,
            "v1",
        )
        assert stale.value.status == "queued" and stale.value.code == "version_conflict"
        assert (await store.set_version(submission.id, expected="v1", version="v2")).version == "v2"
        claimed = await fx.claim(submission, serves={"support": ["v3", "v2"]})
        assert claimed.version == "v2"  # what the move set is what the next claim keeps

    @case
    async def test_set_version_refuses_a_started_or_ended_submission(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Only a queued or waiting submission's version may move: a running, terminalizing
        or settled one is a ``VersionConflict`` naming its status; an unknown id is
        ``SubmissionNotFound``; an empty version or ``"*"`` a ``ValueError``."""
        submission = await fx.admit()
        running = await fx.claim(submission, serves={"support": ["v1"]})
        with pytest.raises(VersionConflict) as refused:
            await store.set_version(submission.id, expected="v1", version="v2")
        assert refused.value.status == "running" and refused.value.actual == "v1"
        attempt = str(running.attempt_id)
        await store.reserve_settlement(submission.id, attempt_id=attempt, settlement={"ok": 1})
        with pytest.raises(VersionConflict):
            await store.set_version(submission.id, expected="v1", version="v2")
        settled = await store.finalize_settlement(submission.id, now=fx.at(1))
        with pytest.raises(VersionConflict) as ended:
            await store.set_version(submission.id, expected="v1", version="v2")
        assert ended.value.status == "settled"
        assert await store.get_submission(submission.id) == settled
        with pytest.raises(SubmissionNotFound):
            await store.set_version("sub-absent", expected=None, version="v2")
        queued = await fx.admit("other")
        for bad in ("", "*"):
            with pytest.raises(ValueError):
                await store.set_version(queued.id, expected=None, version=bad)
        assert await store.get_submission(queued.id) == queued

    @needs("waits")
    @case
    async def test_set_version_moves_a_parked_run(self, store: CompleteStore, fx: Fixtures) -> None:
        """A waiting run (parked on a person or its children) may move: how parked runs are
        upgraded in bulk; it stays waiting."""
        running = await fx.claim(await fx.admit(), serves={"support": ["v1"]})
        head = await store.head(running.conversation_id)
        parked = await store.park(
            running.id, attempt_id=str(running.attempt_id), reason="approval", expected_seq=head
        )
        assert parked.status is SubmissionStatus.WAITING
        moved = await store.set_version(running.id, expected="v1", version="v2")
        assert (moved.status, moved.version, moved.wait_reason) == (
            SubmissionStatus.WAITING,
            "v2",
            "approval",
        )

    @case
    async def test_version_counts_group_the_unsettled_submissions(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Queued, running and waiting submissions by agent, version, status and wait
        reason (``None`` first); terminalizing and settled ones are not counted."""
        assert await store.version_counts() == []
        await fx.admit("a")  # queued, unversioned
        await fx.admit("b")
        await fx.claim(await fx.admit("c"), serves={"support": ["v1"]})  # running on v1
        await fx.claim(await fx.admit("d"), serves={"support": ["v2"]})
        await fx.claim(await fx.admit("e"), serves={"support": ["v2"]})
        ended = await fx.claim(await fx.admit("f"), serves={"support": ["v2"]})
        await store.reserve_settlement(
            ended.id, attempt_id=str(ended.attempt_id), settlement={"ok": 1}
        )
        await fx.claim(await fx.admit("g", agent="other"), serves={"other": ["o1"]})
        expected = [
            VersionCount("other", "o1", "running", None, 1),
            VersionCount("support", None, "queued", None, 2),
            VersionCount("support", "v1", "running", None, 1),
            VersionCount("support", "v2", "running", None, 2),
        ]
        assert await store.version_counts() == expected
        assert await store.version_counts("support") == expected[1:]
        assert await store.version_counts("nobody") == []
        await store.finalize_settlement(ended.id, now=fx.at(1))
        assert await store.version_counts() == expected

    @needs("waits")
    @case
    async def test_version_counts_show_parked_runs_with_their_reason(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        running = await fx.claim(await fx.admit(), serves={"support": ["v1"]})
        head = await store.head(running.conversation_id)
        await store.park(
            running.id, attempt_id=str(running.attempt_id), reason="approval", expected_seq=head
        )
        assert await store.version_counts() == [
            VersionCount("support", "v1", "waiting", "approval", 1)
        ]

    @case
    async def test_workers_are_kept_listed_and_forgotten(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``put_worker`` inserts or replaces; ``since`` stays while what it serves is the
        same and moves when it changes; ``forget_worker`` is idempotent."""
        assert await store.list_workers() == []
        await store.put_worker("w-b", {"support": ["v2", "v1"]}, now=fx.at(0))
        await store.put_worker("w-a", {"support": ["v1"], "other": ["o1", "*"]}, now=fx.at(1))
        await store.put_worker("w-b", {"support": ["v2", "v1"]}, now=fx.at(5))  # the same
        workers = await store.list_workers()
        assert workers == [
            WorkerRow("w-a", {"other": ("o1", "*"), "support": ("v1",)}, fx.at(1)),
            WorkerRow("w-b", {"support": ("v2", "v1")}, fx.at(0)),
        ]
        assert list(workers[0].serves) == ["other", "support"]  # agents in name order
        await store.put_worker("w-b", {"support": ["v3", "v2"]}, now=fx.at(9))  # changed
        assert (await store.list_workers())[1] == WorkerRow(
            "w-b", {"support": ("v3", "v2")}, fx.at(9)
        )
        await store.forget_worker("w-a")
        await store.forget_worker("w-a")
        await store.forget_worker("w-absent")
        assert [w.owner_id for w in await store.list_workers()] == ["w-b"]

    @case
    async def test_a_malformed_worker_is_refused(self, store: CompleteStore, fx: Fixtures) -> None:
        bad: list[object] = [{"support": []}, {"support": ["*"]}, {"support": "v1"}]
        for serves in bad:
            with pytest.raises(ValueError):
                await store.put_worker("w", serves, now=fx.at(0))  # type: ignore[arg-type]
        assert await store.list_workers() == []
