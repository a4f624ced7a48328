"""Conformance cases for the SubmissionStore protocol."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from tether.errors import ClaimLost, DispatchConflict, SubmissionNotFound
from tether.records import Actor
from tether.store import SubmissionStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, offers

__all__ = ("SubmissionCases",)


class SubmissionCases(BaseConformance):
    @case
    async def test_admission_idempotent_replay(self, store: CompleteStore, fx: Fixtures) -> None:
        """Re-admitting the same dispatch id with the same payload returns the original."""
        new = fx.new(dispatch_id="dispatch-1")
        first = await store.admit(new)
        again = await store.admit(fx.new(dispatch_id="dispatch-1"))
        assert first.created and not again.created
        assert again.submission == first.submission
        assert again.submission.id == new.id
        assert len(await store.list_submissions()) == 1

    @case
    async def test_admission_payload_conflict(self, store: CompleteStore, fx: Fixtures) -> None:
        """The same dispatch id with another payload is a DispatchConflict and changes nothing."""
        first = await fx.admit(dispatch_id="dispatch-1")
        with pytest.raises(DispatchConflict):
            await store.admit(fx.new(dispatch_id="dispatch-1", body="something else"))
        assert await store.list_submissions() == [first]

    @case
    async def test_admission_keeps_the_trace_context_beside_the_input(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A submission keeps its caller's trace context; a replay from another trace is the
        same dispatch (the context is not part of its identity) and keeps the first one."""
        trace = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        first = await fx.admit(dispatch_id="traced", trace=trace)
        assert first.trace == trace
        other = {"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"}
        again = await store.admit(fx.new(dispatch_id="traced", trace=other))
        assert not again.created and again.submission.trace == trace
        assert (await store.get_submission(first.id)).trace == trace
        assert (await fx.admit()).trace is None

    @case
    async def test_admission_idempotency_is_scoped_to_the_session_key(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        a = await fx.admit("session-a", dispatch_id="same")
        b = await fx.admit("session-b", dispatch_id="same")
        other_instance = await fx.admit("session-a", dispatch_id="same", instance="globex")
        assert len({a.id, b.id, other_instance.id}) == 3
        assert len({a.conversation_id, b.conversation_id, other_instance.conversation_id}) == 3
        assert a.dispatch_id == b.dispatch_id == "same"

    @case
    async def test_admission_without_dispatch_id_uses_the_submission_id(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        first = await fx.admit()
        second = await fx.admit()
        assert first.dispatch_id == first.id and second.id != first.id
        assert first.conversation_id == second.conversation_id

    @case
    async def test_admission_materializes_the_conversation_once(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        first = await fx.admit()
        await fx.admit()
        records = await store.read(first.conversation_id)
        assert [r.kind for r in records] == ["conversation_created"]
        conversation = await store.get_conversation(first.conversation_id)
        assert conversation.key == fx.key()

    @case
    async def test_get_submission_not_found(self, store: CompleteStore, fx: Fixtures) -> None:
        with pytest.raises(SubmissionNotFound):
            await store.get_submission("sub-absent")

    @case
    async def test_unknown_submission_ids_raise_not_found(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        absent = "sub-absent"
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: store.claim(
                absent, attempt_id="a", owner_id="o", lease_expires_at=fx.at(1), now=fx.at(0)
            ),
            lambda: store.renew_lease(absent, attempt_id="a", lease_expires_at=fx.at(1)),
            lambda: store.release(absent, attempt_id="a"),
            lambda: store.request_cancel(absent, now=fx.at(0)),
            lambda: store.reserve_settlement(absent, attempt_id="a", settlement={"s": 1}),
            lambda: store.finalize_settlement(absent, now=fx.at(0)),
            lambda: store.list_attempts(absent),
        ]
        if offers(store, "waits"):
            calls += [
                lambda: store.park(absent, attempt_id="a", reason="approval"),
                lambda: store.unpark(absent),
            ]
        for call in calls:
            with pytest.raises(SubmissionNotFound):
                await call()

    @case
    async def test_runnable_head_per_session(self, store: CompleteStore, fx: Fixtures) -> None:
        a1 = await fx.admit("session-a")
        await fx.admit("session-a")
        b1 = await fx.admit("session-b")
        assert [s.id for s in await store.list_runnable()] == [a1.id, b1.id]
        assert [s.id for s in await store.list_runnable(limit=1)] == [a1.id]

    @case
    async def test_runnable_excludes_busy_sessions(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        a1 = await fx.admit("session-a")
        await fx.admit("session-a")
        await fx.claim(a1)
        assert await store.list_runnable() == []

    @case
    async def test_list_by_status(self, store: CompleteStore, fx: Fixtures) -> None:
        queued = await fx.admit("session-a")
        running = await fx.claim(await fx.admit("session-b"))
        assert await store.list_submissions(SubmissionStatus.QUEUED) == [queued]
        assert await store.list_submissions(SubmissionStatus.RUNNING) == [running]
        assert await store.list_submissions(conversation_id=queued.conversation_id) == [queued]

    @case
    async def test_list_filters_combine(self, store: CompleteStore, fx: Fixtures) -> None:
        first = await fx.claim(await fx.admit("session-a"))
        await store.reserve_settlement(
            first.id, attempt_id=str(first.attempt_id), settlement={"status": "succeeded"}
        )
        settled = await store.finalize_settlement(first.id, now=fx.at(1))
        running = await fx.claim(await fx.admit("session-a"))
        queued = await fx.admit("session-a")
        elsewhere = await fx.admit("session-b")
        conversation = settled.conversation_id
        assert await store.list_submissions(conversation_id=conversation) == [
            settled,
            running,
            queued,
        ]
        assert await store.list_submissions(conversation_id=conversation, unsettled=True) == [
            running,
            queued,
        ]
        assert await store.list_submissions(unsettled=True) == [running, queued, elsewhere]
        assert await store.list_submissions(
            SubmissionStatus.QUEUED, conversation_id=conversation
        ) == [queued]
        assert await store.list_submissions(SubmissionStatus.SETTLED) == [settled]
        assert await store.list_submissions(SubmissionStatus.SETTLED, unsettled=True) == []

    @case
    async def test_claim_cas(self, store: CompleteStore, fx: Fixtures) -> None:
        submission = await fx.admit()
        claimed = await fx.claim(submission)
        assert claimed.status is SubmissionStatus.RUNNING
        assert claimed.attempt_count == 1 and claimed.attempt_id and claimed.owner_id == "owner-1"
        assert claimed.lease_expires_at == fx.at(60) and claimed.fence >= 1
        with pytest.raises(ClaimLost):
            await store.claim(
                submission.id,
                attempt_id="att-other",
                owner_id="owner-2",
                lease_expires_at=fx.at(60),
                now=fx.at(0),
            )

    @case
    async def test_claim_requires_the_session_head(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await fx.admit()
        second = await fx.admit()
        with pytest.raises(ClaimLost):
            await fx.claim(second)

    @case
    async def test_claim_mints_a_fence_on_the_conversation(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        submission = await fx.admit()
        first = await fx.claim(submission)
        await store.release(submission.id, attempt_id=str(first.attempt_id))
        second = await fx.claim(submission)
        assert second.fence > first.fence
        assert await store.mint_fence(submission.conversation_id) > second.fence

    @case
    async def test_claim_runnable_takes_session_heads_oldest_first(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A batch claim takes only heads, in admission order, at most one per attempt id."""
        a1 = await fx.admit("a")
        await fx.admit("a")  # behind a1: never claimable while a1 is unsettled
        b1 = await fx.admit("b")
        c1 = await fx.admit("c")
        heads = await store.claim_runnable(
            attempt_ids=["att-1", "att-2"], owner_id="w", lease_expires_at=fx.at(60), now=fx.at(0)
        )
        claimed = [head.submission for head in heads]
        assert [(s.id, s.attempt_id) for s in claimed] == [(a1.id, "att-1"), (b1.id, "att-2")]
        assert all(s.status is SubmissionStatus.RUNNING and s.fence >= 1 for s in claimed)
        assert [head.alone for head in heads] == [False, True]  # a1 has a2 queued behind it
        assert [a.id for a in await store.list_attempts(a1.id)] == ["att-1"]
        rest = await store.claim_runnable(
            attempt_ids=["att-3", "att-4"], owner_id="w", lease_expires_at=fx.at(60), now=fx.at(0)
        )
        assert [(head.submission.id, head.alone) for head in rest] == [(c1.id, True)]
        assert (
            await store.claim_runnable(
                attempt_ids=[], owner_id="w", lease_expires_at=fx.at(60), now=fx.at(0)
            )
            == []
        )

    @case
    async def test_concurrent_batch_claims_take_disjoint_heads(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Workers claiming at once never take one head twice, and together take them all."""
        heads = {(await fx.admit(f"s{n}")).id for n in range(12)}
        batches = await asyncio.gather(
            *(
                store.claim_runnable(
                    attempt_ids=[f"att-{w}-{n}" for n in range(4)],
                    owner_id=f"w{w}",
                    lease_expires_at=fx.at(60),
                    now=fx.at(0),
                )
                for w in range(4)
            )
        )
        taken = [head.submission.id for batch in batches for head in batch]
        assert len(taken) == len(set(taken)) <= 12 and set(taken) <= heads
        left = await store.claim_runnable(
            attempt_ids=[f"att-x-{n}" for n in range(12)],
            owner_id="x",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
        )
        assert set(taken) | {head.submission.id for head in left} == heads

    @case
    async def test_concurrent_claims_have_exactly_one_winner(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        submission = await fx.admit()
        outcomes = await asyncio.gather(
            *(
                store.claim(
                    submission.id,
                    attempt_id=f"att-{n}",
                    owner_id=f"owner-{n}",
                    lease_expires_at=fx.at(60),
                    now=fx.at(0),
                )
                for n in range(16)
            ),
            return_exceptions=True,
        )
        winners = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(winners) == 1
        assert all(isinstance(o, ClaimLost) for o in outcomes if isinstance(o, BaseException))
        assert (await store.get_submission(submission.id)).attempt_count == 1

    @case
    async def test_attempt_markers(self, store: CompleteStore, fx: Fixtures) -> None:
        submission = await fx.admit()
        first = await fx.claim(submission)
        await store.release(submission.id, attempt_id=str(first.attempt_id))
        second = await fx.claim(submission)
        attempts = await store.list_attempts(submission.id)
        assert [(a.id, a.number) for a in attempts] == [
            (first.attempt_id, 1),
            (second.attempt_id, 2),
        ]
        assert [a.fence for a in attempts] == [first.fence, second.fence]
        assert all(a.owner_id == "owner-1" and a.submission_id == submission.id for a in attempts)

    @case
    async def test_an_attempt_starts_no_earlier_than_its_predecessor_settled(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A claim whose ``now`` was read before the settlement that made its submission the
        session's head (a worker reads its clock, then waits for the store) records the
        attempt's start at that settlement, never before it: a session's runs never overlap
        on its timeline. A later ``now`` stands."""
        payload = {"status": "succeeded", "result": None}
        for claim_one in (True, False):  # ``claim`` and ``claim_runnable``
            session = f"ordered-{claim_one}"
            first, second = [await fx.admit(session) for _ in range(2)]
            await store.settle_absorbed(first.id, settlement=payload, now=fx.at(10))
            if claim_one:
                await store.claim(
                    second.id,
                    attempt_id="early",
                    owner_id="w",
                    lease_expires_at=fx.at(60),
                    now=fx.at(5),
                )
            else:
                await store.claim_runnable(
                    attempt_ids=["early"],
                    owner_id="w",
                    lease_expires_at=fx.at(60),
                    now=fx.at(5),
                )
            [attempt] = await store.list_attempts(second.id)
            assert attempt.started_at == fx.at(10)
        alone = await fx.claim(await fx.admit("no-predecessor"))
        [attempt] = await store.list_attempts(alone.id)
        assert attempt.started_at == fx.at(0)

    @case
    async def test_lease_renew_and_expiry(self, store: CompleteStore, fx: Fixtures) -> None:
        submission = await fx.claim(await fx.admit(), lease_seconds=0.05)
        assert await store.list_expired_leases(fx.at(0)) == []
        assert [s.id for s in await store.list_expired_leases(fx.at(1))] == [submission.id]
        attempt = str(submission.attempt_id)
        renewed = await store.renew_lease(
            submission.id, attempt_id=attempt, lease_expires_at=fx.at(3600)
        )
        assert renewed.lease_expires_at == fx.at(3600)
        assert await store.list_expired_leases(fx.at(1)) == []
        with pytest.raises(ClaimLost):
            await store.renew_lease(
                submission.id, attempt_id="att-stale", lease_expires_at=fx.at(7200)
            )

    @case
    async def test_release_submission(self, store: CompleteStore, fx: Fixtures) -> None:
        claimed = await fx.claim(await fx.admit())
        attempt = str(claimed.attempt_id)
        with pytest.raises(ClaimLost):
            await store.release(claimed.id, attempt_id="att-stale", last_error="nope")
        released = await store.release(claimed.id, attempt_id=attempt, last_error="boom")
        assert released.status is SubmissionStatus.QUEUED and released.last_error == "boom"
        assert released.attempt_id is None and released.lease_expires_at is None
        again = await fx.claim(released)
        assert again.attempt_count == 2 and again.last_error == "boom"
        quiet = await store.release(claimed.id, attempt_id=str(again.attempt_id))
        assert quiet.last_error == "boom"

    @case
    async def test_release_can_refund_the_attempt(self, store: CompleteStore, fx: Fixtures) -> None:
        """A graceful shutdown releases without burning an attempt."""
        claimed = await fx.claim(await fx.admit())
        released = await store.release(
            claimed.id, attempt_id=str(claimed.attempt_id), refund_attempt=True
        )
        assert released.attempt_count == 0 and released.status is SubmissionStatus.QUEUED
        again = await fx.claim(released)
        assert again.attempt_count == 1
        assert len(await store.list_attempts(claimed.id)) == 2  # the markers stay

    @case
    async def test_settle_absorbed(self, store: CompleteStore, fx: Fixtures) -> None:
        """A queued submission whose work another one absorbed settles without an attempt."""
        host = await fx.claim(await fx.admit())
        steer = await fx.admit()
        payload = {"status": "succeeded", "result": {"deliveredTo": host.id}}
        settled = await store.settle_absorbed(steer.id, settlement=payload, now=fx.at(3))
        assert settled.status is SubmissionStatus.SETTLED and settled.settlement == payload
        assert settled.settled_at == fx.at(3) and settled.attempt_count == 0
        assert await store.settle_absorbed(steer.id, settlement=payload, now=fx.at(4)) == settled
        with pytest.raises(ClaimLost):
            await store.settle_absorbed(host.id, settlement=payload, now=fx.at(3))
        with pytest.raises(SubmissionNotFound):
            await store.settle_absorbed("sub-absent", settlement=payload, now=fx.at(3))

    @case
    async def test_request_cancel_keeps_the_first_stamp(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        queued = await fx.admit()
        first = await store.request_cancel(queued.id, now=fx.at(1))
        second = await store.request_cancel(queued.id, now=fx.at(2))
        assert first.cancel_requested_at == second.cancel_requested_at == fx.at(1)
        assert second.status is SubmissionStatus.QUEUED

    @case
    async def test_request_cancel_keeps_who_asked_with_the_first_stamp(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        ann = Actor(subject="ann", tenant="acme", display="Ann")
        queued = await fx.admit()
        assert queued.cancel_requested_by is None
        first = await store.request_cancel(queued.id, now=fx.at(1), by=ann)
        again = await store.request_cancel(queued.id, now=fx.at(2), by=Actor(subject="bob"))
        assert first.cancel_requested_by == again.cancel_requested_by == ann
        assert (await store.get_submission(queued.id)).cancel_requested_by == ann
        running = await fx.claim(await fx.admit("other"))
        assert running.cancel_requested_by is None
        anonymous = await store.request_cancel(running.id, now=fx.at(1))
        assert anonymous.cancel_requested_at == fx.at(1) and anonymous.cancel_requested_by is None
        later = await store.request_cancel(running.id, now=fx.at(2), by=ann)
        assert later.cancel_requested_by is None  # the first request was no one's
        [listed] = await store.list_submissions(conversation_id=queued.conversation_id)
        assert listed.cancel_requested_by == ann

    @case
    async def test_request_cancel_leaves_settled_untouched(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        claimed = await fx.claim(await fx.admit())
        await store.reserve_settlement(
            claimed.id, attempt_id=str(claimed.attempt_id), settlement={"status": "succeeded"}
        )
        settled = await store.finalize_settlement(claimed.id, now=fx.at(1))
        assert await store.request_cancel(claimed.id, now=fx.at(2)) == settled

    @case
    async def test_settlement_phases(self, store: CompleteStore, fx: Fixtures) -> None:
        claimed = await fx.claim(await fx.admit())
        attempt = str(claimed.attempt_id)
        payload = {"status": "succeeded", "result": {"answer": 42, "ratio": 0.5}}
        with pytest.raises(ClaimLost):
            await store.reserve_settlement(claimed.id, attempt_id="att-stale", settlement=payload)
        reserved = await store.reserve_settlement(
            claimed.id, attempt_id=attempt, settlement=payload
        )
        assert reserved.status is SubmissionStatus.TERMINALIZING and reserved.settlement == payload
        with pytest.raises(ClaimLost):
            await store.reserve_settlement(claimed.id, attempt_id=attempt, settlement=payload)
        assert await store.list_runnable() == []
        later = await fx.admit()
        settled = await store.finalize_settlement(claimed.id, now=fx.at(5))
        assert settled.status is SubmissionStatus.SETTLED and settled.settled_at == fx.at(5)
        assert settled.settlement == payload
        assert [s.id for s in await store.list_runnable()] == [later.id]

    @case
    async def test_finalize_is_idempotent(self, store: CompleteStore, fx: Fixtures) -> None:
        claimed = await fx.claim(await fx.admit())
        await store.reserve_settlement(
            claimed.id, attempt_id=str(claimed.attempt_id), settlement={"s": 1}
        )
        first = await store.finalize_settlement(claimed.id, now=fx.at(1))
        again = await store.finalize_settlement(claimed.id, now=fx.at(2))
        assert again == first and again.settled_at == fx.at(1)

    @case
    async def test_settlement_from_a_wrong_state_is_claim_lost(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        queued = await fx.admit("session-a")
        with pytest.raises(ClaimLost):
            await store.finalize_settlement(queued.id, now=fx.at(1))
        with pytest.raises(ClaimLost):
            await store.reserve_settlement(queued.id, attempt_id="att-x", settlement={"s": 1})
        running = await fx.claim(await fx.admit("session-b"))
        with pytest.raises(ClaimLost):
            await store.finalize_settlement(running.id, now=fx.at(1))
        assert (await store.get_submission(queued.id)).status is SubmissionStatus.QUEUED
        assert (await store.get_submission(running.id)).status is SubmissionStatus.RUNNING
