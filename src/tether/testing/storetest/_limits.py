"""Conformance cases for the ``limits`` capability (``LimitStore``): slots held and given
back, expiring with their lease, a sliding window of calls never over its rate, tokens per
minute, a pause for everyone, and claims that pass over what is at its limit."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from tether.store import ClaimSlots, HeldBack, LimitAsk, Submission, SubmissionStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("LimitCases",)


def _ask(fx: Fixtures, holder: str, *, key: str = "model:openai", **limits: object) -> LimitAsk:
    fields: dict[str, object] = {
        "key": key,
        "holder": holder,
        "owner_id": "owner-1",
        "slot_expires_at": fx.at(30),
        **limits,
    }
    return LimitAsk(**fields)  # type: ignore[arg-type]


@needs("limits")
class LimitCases(BaseConformance):
    @case
    async def test_slots_are_held_to_the_limit_and_given_back(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``concurrency`` slots at most; asking again as a holder is the same slot; a slot
        released is free at once; the refusal says when the first slot would expire."""
        now = fx.at(0)
        assert await store.acquire_limit(_ask(fx, "a", concurrency=2), now=now) is None
        assert await store.acquire_limit(_ask(fx, "a", concurrency=2), now=now) is None
        assert await store.acquire_limit(_ask(fx, "b", concurrency=2), now=now) is None
        assert await store.acquire_limit(_ask(fx, "c", concurrency=2), now=now) == fx.at(30)
        assert await store.limit_slots("model:", now=now) == {"model:openai": 2}
        await store.release_limit("model:openai", holder="a")
        await store.release_limit("model:openai", holder="a")  # idempotent
        assert await store.acquire_limit(_ask(fx, "c", concurrency=2), now=now) is None
        assert await store.limit_slots("", now=now) == {"model:openai": 2}
        assert await store.limit_slots("agent:", now=now) == {}

    @case
    async def test_a_dead_owners_slots_come_back(self, store: CompleteStore, fx: Fixtures) -> None:
        """A slot expires with its lease unless its owner renews it, and every slot of an
        owner known dead is given back at once."""
        await store.acquire_limit(_ask(fx, "a", concurrency=1), now=fx.at(0))
        assert await store.acquire_limit(_ask(fx, "b", concurrency=1), now=fx.at(10)) == fx.at(30)
        assert await store.renew_limits("owner-1", expires_at=fx.at(60)) == 1
        assert await store.acquire_limit(_ask(fx, "b", concurrency=1), now=fx.at(40)) == fx.at(60)
        assert await store.acquire_limit(_ask(fx, "b", concurrency=1), now=fx.at(60)) is None
        other = LimitAsk("agent:x", "c", "owner-2", fx.at(90), concurrency=1)
        assert await store.acquire_limit(other, now=fx.at(60)) is None
        assert await store.release_owner_limits("owner-2") == 1
        assert await store.limit_slots("agent:", now=fx.at(60)) == {}
        assert await store.renew_limits("owner-9", expires_at=fx.at(90)) == 0

    @case
    async def test_a_rate_is_a_sliding_window_never_over(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """At most ``rate`` calls in any ``per_seconds``: a refusal names when the oldest
        call leaves the window, and a call is granted exactly then."""
        granted: list[float] = []
        t = 0.0
        while t < 30:
            retry_at = await store.acquire_limit(
                _ask(fx, f"call-{t}", rate=3, per_seconds=10), now=fx.at(t)
            )
            if retry_at is None:
                granted.append(t)
                t += 1
            else:
                assert retry_at > fx.at(t)
                t = (retry_at - fx.at(0)).total_seconds()
        assert granted == [0, 1, 2, 10, 11, 12, 20, 21, 22]
        for start in range(30):
            assert sum(start <= g < start + 10 for g in granted) <= 3

    @case
    async def test_a_lease_of_several_calls_counts_them_all(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """An ask of ``calls`` permits takes all of them or none: counted as that many calls
        in the window, from its grant, and refused while fewer are free."""
        assert (
            await store.acquire_limit(_ask(fx, "a", rate=5, per_seconds=10, calls=3), now=fx.at(0))
            is None
        )
        assert await store.acquire_limit(
            _ask(fx, "b", rate=5, per_seconds=10, calls=3), now=fx.at(1)
        ) == fx.at(10)
        assert (
            await store.acquire_limit(_ask(fx, "b", rate=5, per_seconds=10, calls=2), now=fx.at(1))
            is None
        )
        assert await store.acquire_limit(
            _ask(fx, "c", rate=5, per_seconds=10), now=fx.at(2)
        ) == fx.at(10)
        assert (
            await store.acquire_limit(_ask(fx, "c", rate=5, per_seconds=10, calls=3), now=fx.at(10))
            is None
        )
        assert await store.acquire_limit(
            _ask(fx, "d", rate=5, per_seconds=10), now=fx.at(10)
        ) == fx.at(11)

    @case
    async def test_a_leases_unspent_calls_are_given_back(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``release_limit(calls=n)`` frees ``n`` of a holder's calls (at most what it holds):
        their places in the window are free at once."""
        assert (
            await store.acquire_limit(_ask(fx, "a", calls=3, rate=4, per_seconds=10), now=fx.at(0))
            is None
        )
        assert (
            await store.acquire_limit(_ask(fx, "b", rate=4, per_seconds=10), now=fx.at(0)) is None
        )
        assert await store.acquire_limit(
            _ask(fx, "c", rate=4, per_seconds=10), now=fx.at(1)
        ) == fx.at(10)
        await store.release_limit("model:openai", holder="a", calls=2)
        assert (
            await store.acquire_limit(_ask(fx, "c", calls=2, rate=4, per_seconds=10), now=fx.at(1))
            is None
        )
        await store.release_limit("model:openai", holder="b", calls=5)  # more than it holds
        assert (
            await store.acquire_limit(_ask(fx, "d", rate=4, per_seconds=10), now=fx.at(1)) is None
        )
        assert await store.acquire_limit(
            _ask(fx, "e", rate=4, per_seconds=10), now=fx.at(1)
        ) == fx.at(10)

    @case
    async def test_tokens_per_minute_and_a_pause(self, store: CompleteStore, fx: Fixtures) -> None:
        """Tokens spent count for a minute; a pause grants nothing, to anyone, before it
        ends (the latest pause kept wins)."""
        ask = _ask(fx, "a", tokens_per_minute=1000)
        assert await store.acquire_limit(ask, now=fx.at(0)) is None
        await store.spend_limit("model:openai", tokens=600, now=fx.at(0))
        await store.spend_limit("model:openai", tokens=0, now=fx.at(0))
        assert await store.acquire_limit(ask, now=fx.at(1)) is None
        await store.spend_limit("model:openai", tokens=500, now=fx.at(5))
        assert await store.acquire_limit(ask, now=fx.at(6)) == fx.at(60)
        assert await store.acquire_limit(ask, now=fx.at(60)) is None  # 500 left in the minute
        await store.pause_limit("model:openai", until=fx.at(90))
        await store.pause_limit("model:openai", until=fx.at(80))
        assert await store.acquire_limit(_ask(fx, "b"), now=fx.at(70)) == fx.at(90)
        assert await store.acquire_limit(_ask(fx, "b", key="model:other"), now=fx.at(70)) is None
        assert await store.acquire_limit(_ask(fx, "b"), now=fx.at(90)) is None

    @case
    async def test_concurrent_asks_never_grant_over_the_limit(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Asks racing for one key are decided one at a time."""
        asks = [_ask(fx, f"h{n}", concurrency=3, rate=5, per_seconds=60) for n in range(12)]
        answers = await asyncio.gather(*(store.acquire_limit(a, now=fx.at(0)) for a in asks))
        assert sum(answer is None for answer in answers) == 3
        assert await store.limit_slots("model:", now=fx.at(0)) == {"model:openai": 3}

    @case
    async def test_malformed_asks_are_refused(self, store: CompleteStore, fx: Fixtures) -> None:
        naive = datetime(2026, 1, 1)
        for bad in (
            _ask(fx, "a", key=""),
            _ask(fx, ""),
            _ask(fx, "a", concurrency=0),
            _ask(fx, "a", rate=2),
            _ask(fx, "a", rate=2, per_seconds=0),
            _ask(fx, "a", rate=2, per_seconds=1, calls=0),
            _ask(fx, "a", rate=2, per_seconds=1, calls=3),
            LimitAsk("k", "a", "o", naive, concurrency=1),
        ):
            with pytest.raises(ValueError):
                await store.acquire_limit(bad, now=fx.at(0))
        with pytest.raises(ValueError):
            await store.spend_limit("k", tokens=-1, now=fx.at(0))
        with pytest.raises(ValueError):
            await store.pause_limit("", until=fx.at(0))
        assert await store.limit_slots("", now=fx.at(0)) == {}

    @case
    async def test_claims_pass_over_what_is_held_back(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A head whose agent or tenant is held back is not claimed, nor counted against the
        batch; the heads behind it are."""
        held = await fx.admit("a", agent="busy")
        acme = await fx.admit("b", tenant="acme")
        free = await fx.admit("c")
        other = await fx.admit("d", tenant="globex")
        heads = await store.claim_runnable(
            attempt_ids=["att-1", "att-2"],
            owner_id="w",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
            held_back=HeldBack(agents=frozenset({"busy"}), tenants=frozenset({"acme"})),
        )
        assert [h.submission.id for h in heads] == [free.id, other.id]
        assert (await store.get_submission(held.id)).status is SubmissionStatus.QUEUED
        rest = await store.claim_runnable(
            attempt_ids=["att-3", "att-4"],
            owner_id="w",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
            held_back=HeldBack(),
        )
        assert [h.submission.id for h in rest] == [held.id, acme.id]

    @case
    async def test_a_claim_takes_its_heads_slots_and_gives_back_ended_ones(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """With ``slots``, a claim takes each head's slots in its own transaction, all of a
        head's or none (then ``slots_refused``, holding nothing), after giving back the slots
        of runs that ended, even when it claims nothing."""
        first = await fx.admit("a", agent="busy")
        second = await fx.admit("b", agent="busy", tenant="acme")
        third = await fx.admit("c", agent="other", tenant="acme")

        def asks(submission: Submission) -> list[LimitAsk]:
            holder = str(submission.attempt_id)
            found = [LimitAsk("agent:" + submission.key.agent, holder, "w", fx.at(30), 1)]
            if submission.tenant is not None:
                found.append(LimitAsk("tenant:" + submission.tenant, holder, "w", fx.at(30), 5))
            return found

        heads = await store.claim_runnable(
            attempt_ids=["att-1", "att-2", "att-3"],
            owner_id="w",
            lease_expires_at=fx.at(60),
            now=fx.at(0),
            slots=ClaimSlots(asks),
        )
        by_id = {h.submission.id: h.slots_refused for h in heads}
        assert by_id == {first.id: False, second.id: True, third.id: False}
        assert await store.limit_slots("", now=fx.at(0)) == {
            "agent:busy": 1,
            "agent:other": 1,
            "tenant:acme": 1,
        }
        attempt = {h.submission.id: str(h.submission.attempt_id) for h in heads}
        await store.release(second.id, attempt_id=attempt[second.id], refund_attempt=True)
        nothing = await store.claim_runnable(
            attempt_ids=[],
            owner_id="w",
            lease_expires_at=fx.at(60),
            now=fx.at(1),
            slots=ClaimSlots(asks, give_back=[("agent:busy", attempt[first.id])]),
        )
        assert nothing == []
        assert await store.limit_slots("agent:", now=fx.at(1)) == {"agent:other": 1}
        again = await store.claim_runnable(
            attempt_ids=["att-4"],
            owner_id="w",
            lease_expires_at=fx.at(60),
            now=fx.at(2),
            slots=ClaimSlots(asks, give_back=[("agent:other", attempt[third.id])]),
        )
        assert [(h.submission.id, h.slots_refused) for h in again] == [(second.id, False)]
        assert await store.limit_slots("", now=fx.at(2)) == {"agent:busy": 1, "tenant:acme": 2}
