"""Conformance cases for the ``usage`` capability (``UsageStore``): a tenant's spending per
UTC day, added up by the appends that spend (on every append path) and by nothing else, and
the reservations of its model calls in flight, given back by the completion's append, by a
release, or by their expiry."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from tether.messages import Mediation, Message, Usage
from tether.records import (
    AssistantMessageCompleted,
    Payload,
    RecordDraft,
    SubmissionSettled,
    ToolCalled,
    format_time,
)
from tether.store import (
    ClaimSettlement,
    UsageAsk,
    UsageLease,
    UsageLimit,
    UsageRefusal,
    UsageSpent,
)
from tether.testing.storetest._base import T0, BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("UsageCases",)

ACME, GLOBEX = "acme", "globex"
DAY = date(2026, 1, 1)
NEXT = DAY + timedelta(days=1)
MONTH_END = date(2026, 2, 1)


def _completed(call: str, tokens: int, cost: float | None = None, **more: object) -> Payload:
    return AssistantMessageCompleted(
        call_id=call,
        message=Message.assistant("ok"),
        usage=Usage(input_tokens=tokens - tokens // 4, output_tokens=tokens // 4),
        cost=cost,
        **more,
    )


def _tool(call: str, mediation: Mediation = Mediation.HOST) -> Payload:
    return ToolCalled(
        call_id=call, tool="search", args={}, idempotency_key=call, mediation=mediation
    )


async def _append(
    store: CompleteStore, fx: Fixtures, cid: str, payloads: list[Payload], at: datetime = T0
) -> None:
    drafts = [RecordDraft(p, id=fx.id("rec"), time=format_time(at)) for p in payloads]
    head = await store.head(cid)
    await store.append(cid, drafts, expected_seq=head, fence=0)


def _calls(found: UsageLease | UsageRefusal) -> int:
    """The calls a lease reserved (0: refused)."""
    return found.calls if isinstance(found, UsageLease) else 0


def _limit(start: date = DAY, end: date = NEXT, **limits: float) -> UsageLimit:
    return UsageLimit(start, end, **limits)  # type: ignore[arg-type]


@needs("usage")
class UsageCases(BaseConformance):
    @case
    async def test_appends_add_up_a_tenants_spending_per_day(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A completed model call counts (its tokens, its cost), an interrupted one does not;
        a tool call the host runs counts by its intent, a reported one does not; each on the
        UTC day of its record's time; a month is the sum of its days; another tenant's and
        no tenant's conversations count under none of them."""
        cid = (await fx.admit("s", tenant=ACME)).conversation_id
        await _append(
            store,
            fx,
            cid,
            [
                _completed("m1", 100, 0.25),
                _completed("m2", 40),  # unpriced: no cost
                _completed("m3", 999, 9.0, interrupted=True),
                _tool("t1"),
                _tool("t2", Mediation.APPROVAL),
                _tool("t3", Mediation.REPORTED),
            ],
        )
        tomorrow = T0 + timedelta(days=1, seconds=5)
        await _append(store, fx, cid, [_completed("m4", 1000, 0.5)], at=tomorrow)
        other = (await fx.admit("o", tenant=GLOBEX)).conversation_id
        await _append(store, fx, other, [_completed("g1", 7, 0.01), _tool("g2")])
        nobody = (await fx.admit("n")).conversation_id
        await _append(store, fx, nobody, [_completed("n1", 7, 0.01)])

        day = await store.tenant_usage(ACME, start=DAY, end=NEXT)
        assert (day.model_calls, day.tokens, day.tool_calls) == (2, 140, 2)
        assert abs(day.cost_usd - 0.25) < 1e-9 and day.max_call_tokens == 100
        month = await store.tenant_usage(ACME, start=date(2026, 1, 1), end=MONTH_END)
        assert (month.model_calls, month.tokens, month.tool_calls) == (3, 1140, 2)
        assert abs(month.cost_usd - 0.75) < 1e-9
        assert month.max_call_tokens == 1000 and abs(month.max_call_cost - 0.5) < 1e-9
        globex = await store.tenant_usage(GLOBEX, start=DAY, end=MONTH_END)
        assert (globex.model_calls, globex.tokens, globex.tool_calls) == (1, 7, 1)
        assert await store.tenant_usage("nobody", start=DAY, end=MONTH_END) == UsageSpent()
        assert await store.tenant_usage(ACME, start=MONTH_END, end=date(2026, 3, 1)) == UsageSpent()

    @case
    async def test_a_settling_append_spends_too(self, store: CompleteStore, fx: Fixtures) -> None:
        """The append that settles a claim adds what it spends in its own commit."""
        sub = await fx.claim(await fx.admit("s", tenant=ACME))
        head = await store.head(sub.conversation_id)
        drafts = [
            RecordDraft(p, id=fx.id("rec"), time=format_time(T0), submission_id=sub.id)
            for p in (_completed("m1", 10, 0.1), SubmissionSettled(status="succeeded"))
        ]
        await store.append_settled(
            sub.conversation_id,
            drafts,
            expected_seq=head,
            fence=sub.fence,
            settle=ClaimSettlement(sub.id, sub.attempt_id or "", {"status": "succeeded"}, fx.at(1)),
        )
        spent = await store.tenant_usage(ACME, start=DAY, end=NEXT)
        assert (spent.model_calls, spent.tokens) == (1, 10)

    @case
    @needs("forks")
    async def test_a_fork_spends_nothing_by_copying(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A fork copies its parent's head verbatim, spent calls included: it adds nothing to
        the tenant's usage (the calls were counted once, when they were made); what the fork
        appends after is the tenant's like any append."""
        cid = (await fx.admit("s", tenant=ACME)).conversation_id
        await _append(store, fx, cid, [_completed("m1", 10, 0.1), _tool("t1")])
        head = await store.head(cid)
        fork = await store.fork(
            cid,
            at_seq=head,
            key=fx.key("forked"),
            new_conversation_id=fx.id("conv"),
            created_at=T0,
        )
        assert fork.tenant == ACME
        spent = await store.tenant_usage(ACME, start=DAY, end=NEXT)
        assert (spent.model_calls, spent.tool_calls) == (1, 1)
        await _append(store, fx, fork.id, [_completed("m2", 5)])
        spent = await store.tenant_usage(ACME, start=DAY, end=NEXT)
        assert (spent.model_calls, spent.tokens) == (2, 15)

    @case
    async def test_reservations_hold_the_calls_in_flight(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Spent plus reserved never reaches past a model-call limit: a refusal while calls
        are in flight is ``waiting``; the completion's append gives its conversation's
        reservation back, and so does a release (once each: a second is nothing)."""
        a = (await fx.admit("a", tenant=ACME)).conversation_id
        b = (await fx.admit("b", tenant=ACME)).conversation_id
        limits = (_limit(model_calls=2),)

        def ask(holder: str, seconds: float = 30) -> UsageAsk:
            return UsageAsk(ACME, holder, "owner-1", fx.at(seconds), limits)

        assert await store.reserve_usage(ask(a), now=fx.at(0)) is None
        assert await store.reserve_usage(ask(b), now=fx.at(0)) is None
        refused = await store.reserve_usage(ask(b), now=fx.at(0))
        assert refused is not None and refused.limit == "modelCalls" and refused.waiting
        assert refused.reserved.calls == 2 and refused.used == 0 and refused.max == 2
        await _append(store, fx, a, [_completed("m1", 10)])  # a's call is in: its hold goes
        refused = await store.reserve_usage(ask(a), now=fx.at(0))
        assert refused is not None and refused.waiting and refused.spent.model_calls == 1
        await store.release_usage(ACME, holder=b)  # b's call failed
        await store.release_usage(ACME, holder=b)  # nothing more to give back
        assert await store.reserve_usage(ask(a), now=fx.at(0)) is None
        await _append(store, fx, a, [_completed("m2", 10)])
        refused = await store.reserve_usage(ask(b), now=fx.at(0))
        assert refused is not None and not refused.waiting and refused.used == 2
        other = UsageAsk(GLOBEX, "g", "owner-1", fx.at(30), limits)  # another tenant's
        assert await store.reserve_usage(other, now=fx.at(0)) is None

    @case
    async def test_a_completion_gives_back_its_conversations_least_hold(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Two calls of one conversation in flight across midnight: the first holds the day
        before's largest call, the second nothing (no call of its day yet). The second's
        completion gives back the reservation holding least, so the first call, still in
        flight, still holds its 400 tokens against a limit of the new day."""
        cid = (await fx.admit("s", tenant=ACME)).conversation_id
        await _append(store, fx, cid, [_completed("m1", 400)])
        day = 24 * 3600
        until = fx.at(2 * day)
        first = UsageAsk(ACME, cid, "owner-1", until, (_limit(tokens=10_000),))
        assert await store.reserve_usage(first, now=fx.at(1)) is None  # holds 400
        second = UsageAsk(ACME, cid, "owner-1", until, (_limit(NEXT, NEXT + timedelta(1)),))
        assert await store.reserve_usage(second, now=fx.at(day + 1)) is None  # holds 0
        await _append(store, fx, cid, [_completed("m2", 10)], at=T0 + timedelta(days=1))
        tight = UsageAsk(
            ACME, "other", "owner-1", until, (_limit(NEXT, NEXT + timedelta(1), tokens=400),)
        )
        refused = await store.reserve_usage(tight, now=fx.at(day + 2))
        assert refused is not None and refused.limit == "tokens"
        assert (refused.used, refused.reserved.tokens, refused.reserved.calls) == (10, 400, 1)

    @case
    async def test_a_dead_workers_reservations_expire(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A reservation expires unless its owner renews it."""
        limits = (_limit(model_calls=1),)
        first = UsageAsk(ACME, "conv-a", "owner-1", fx.at(30), limits)
        second = UsageAsk(ACME, "conv-b", "owner-2", fx.at(90), limits)
        assert await store.reserve_usage(first, now=fx.at(0)) is None
        assert await store.reserve_usage(second, now=fx.at(10)) is not None
        assert await store.renew_usage("owner-1", expires_at=fx.at(60)) == 1
        assert await store.reserve_usage(second, now=fx.at(40)) is not None
        assert await store.reserve_usage(second, now=fx.at(60)) is None
        assert await store.renew_usage("owner-9", expires_at=fx.at(90)) == 0

    @case
    async def test_tokens_and_cost_hold_the_largest_call(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A reservation holds the period's largest call's tokens and cost, so concurrent
        calls stop while what is spent and held reaches the limit; a limit of each period
        asked is checked, and a refusal names which."""
        cid = (await fx.admit("s", tenant=ACME)).conversation_id
        await _append(store, fx, cid, [_completed("m1", 400, 0.4)])
        day = _limit(tokens=1000)
        month = _limit(end=MONTH_END, cost_usd=1.0)

        def ask(holder: str) -> UsageAsk:
            return UsageAsk(ACME, holder, "owner-1", fx.at(30), (day, month))

        assert await store.reserve_usage(ask("x"), now=fx.at(0)) is None  # 400 + 0 < 1000
        # 400 spent + 400 held < 1000 tokens, 0.4 + 0.4 < 1.0 dollars
        assert await store.reserve_usage(ask("y"), now=fx.at(0)) is None
        refused = await store.reserve_usage(ask("z"), now=fx.at(0))
        assert refused is not None and refused.index == 0 and refused.limit == "tokens"
        assert refused.used == 400 and refused.reserved.tokens == 800 and refused.waiting
        with_cost = UsageAsk(ACME, "w", "owner-1", fx.at(30), (month,))
        refused = await store.reserve_usage(with_cost, now=fx.at(0))
        assert refused is not None and refused.index == 0 and refused.limit == "costUsd"

    @case
    async def test_a_malformed_ask_is_refused(self, store: CompleteStore, fx: Fixtures) -> None:
        """An empty tenant or holder, a period that ends before it starts, a negative limit, a
        naive time: ``ValueError``, nothing reserved."""
        bad = [
            UsageAsk("", "h", "o", fx.at(30), (_limit(model_calls=1),)),
            UsageAsk(ACME, "", "o", fx.at(30), (_limit(model_calls=1),)),
            UsageAsk(ACME, "h", "o", fx.at(30), (_limit(NEXT, DAY, model_calls=1),)),
            UsageAsk(ACME, "h", "o", fx.at(30), (_limit(model_calls=-1),)),
            UsageAsk(ACME, "h", "o", datetime(2026, 1, 1), (_limit(model_calls=1),)),
        ]
        for ask in bad:
            with pytest.raises(ValueError):
                await store.reserve_usage(ask, now=fx.at(0))
        ok = UsageAsk(ACME, "h", "o", fx.at(30), (_limit(model_calls=1),))
        assert await store.reserve_usage(ok, now=fx.at(0)) is None

    @case
    async def test_a_share_reserves_up_to_half_of_what_is_left(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``lease_usage`` reserves up to ``calls`` at once, never more than half of what
        each limit has left for calls asked one at a time (at least one): near a limit a
        share shrinks to single calls, and the model calls are never over."""
        limits = (_limit(model_calls=10),)

        def ask(calls: int) -> UsageAsk:
            return UsageAsk(ACME, "worker:1", "owner-1", fx.at(30), limits, calls)

        granted = [_calls(await store.lease_usage(ask(16), now=fx.at(0))) for _ in range(5)]
        assert granted == [5, 2, 1, 1, 1]
        refused = await store.lease_usage(ask(16), now=fx.at(0))
        assert isinstance(refused, UsageRefusal) and refused.waiting
        assert refused.reserved.calls == 10
        await store.release_usage(ACME, holder="worker:1", calls=4)
        assert _calls(await store.lease_usage(ask(1), now=fx.at(0))) == 1
        assert _calls(await store.lease_usage(ask(16), now=fx.at(0))) == 1  # 3 left: half is 1
        unlimited = UsageAsk(GLOBEX, "worker:1", "owner-1", fx.at(30), (_limit(),), 16)
        assert _calls(await store.lease_usage(unlimited, now=fx.at(0))) == 16
        cid = (await fx.admit("s", tenant=ACME)).conversation_id
        await _append(store, fx, cid, [_completed("m1", 400)])
        by_tokens = UsageAsk(ACME, "w2", "owner-1", fx.at(30), (_limit(tokens=2000),), 16)
        # 400 spent, 400 held by each call: 4 calls one at a time, a share of 2
        assert await store.lease_usage(by_tokens, now=fx.at(0)) == UsageLease(2, 400, 0.0)
        no_call_yet = UsageAsk(GLOBEX, "w3", "owner-1", fx.at(30), (_limit(cost_usd=5.0),), 16)
        # no call of its period yet: nothing to size a share by
        assert _calls(await store.lease_usage(no_call_yet, now=fx.at(0))) == 1
        with pytest.raises(ValueError):
            await store.lease_usage(ask(0), now=fx.at(0))

    @case
    async def test_an_append_naming_a_holder_gives_back_its_reservations(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A worker's share is given back call by call by the appends that name it
        (``append_spending``, settling or not), not by the conversation's, and a release
        gives back as many as it says (no more than are held)."""
        limits = (_limit(model_calls=4),)
        ask = UsageAsk(ACME, "worker:1", "owner-1", fx.at(30), limits, 16)
        assert _calls(await store.lease_usage(ask, now=fx.at(0))) == 2
        sub = await fx.claim(await fx.admit("s", tenant=ACME))
        cid = sub.conversation_id
        drafts = [RecordDraft(_completed("m1", 10), id=fx.id("rec"), time=format_time(T0))]
        head = await store.head(cid)
        await store.append_spending(
            cid, drafts, expected_seq=head, fence=sub.fence, usage_holder="worker:1"
        )
        # 1 spent, 1 held of 4: a share of 1
        assert _calls(await store.lease_usage(ask, now=fx.at(0))) == 1
        drafts = [
            RecordDraft(p, id=fx.id("rec"), time=format_time(T0), submission_id=sub.id)
            for p in (_completed("m2", 10), SubmissionSettled(status="succeeded"))
        ]
        await store.append_spending(
            cid,
            drafts,
            expected_seq=await store.head(cid),
            fence=sub.fence,
            usage_holder="worker:1",
            settle=ClaimSettlement(sub.id, sub.attempt_id or "", {"status": "succeeded"}, fx.at(1)),
        )
        spent = await store.tenant_usage(ACME, start=DAY, end=NEXT)
        assert spent.model_calls == 2
        found = _calls(await store.lease_usage(ask, now=fx.at(0)))  # 2 spent, 1 held: 1 left
        assert found == 1
        await store.release_usage(ACME, holder="worker:1", calls=5)  # only 2 held
        assert _calls(await store.lease_usage(ask, now=fx.at(0))) == 1  # 2 left: half of it
