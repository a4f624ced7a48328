"""A worker's share of a tenant's budget (docs/budgets.md): the store grants a worker a few
calls at once and the worker spends them in memory, one per call, so most model calls of a
tenant with a budget write nothing to reserve; each call's reservation is its own, and a
call in flight keeps it across leases while the worker's heartbeat renews it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from tether.engine import BudgetExhausted, ManualClock, TenantBudget
from tether.engine._tenant_budget import (
    SHARE_CALLS,
    TenantBudgetGate,
    period_bounds,
    tenant_budget_meter,
)
from tether.messages import Message, Usage
from tether.records import AssistantMessageCompleted, RecordDraft, format_time
from tether.store import (
    MemoryStore,
    NewSubmission,
    SessionKey,
    UsageAsk,
    UsageLimit,
    UsageRefusal,
)

LEASE = 30.0


class _Counted(MemoryStore):
    """A memory store that counts the asks for a reservation."""

    def __init__(self) -> None:
        super().__init__()
        self.asks: list[UsageAsk] = []

    async def reserve_usage(self, ask: UsageAsk, *, now: datetime) -> UsageRefusal | int:
        self.asks.append(ask)
        return await super().reserve_usage(ask, now=now)


def _gate(store: MemoryStore, clock: ManualClock, owner: str, **budget: int) -> TenantBudgetGate:
    budgets = {"acme": TenantBudget(**budget)}
    return TenantBudgetGate(store, budgets, clock=clock, owner_id=owner, lease=LEASE, poll=1.0)


async def _conversation(store: MemoryStore, clock: ManualClock, name: str) -> str:
    new = NewSubmission(
        id=f"sub-{name}",
        key=SessionKey("a", name, "default"),
        conversation_id=f"conv-{name}",
        input={"kind": "user", "body": "hi"},
        created_at=clock.now(),
        tenant="acme",
    )
    return (await store.admit(new)).submission.conversation_id


async def _complete(store: MemoryStore, clock: ManualClock, cid: str, n: int) -> None:
    """Append a call's completion, as the journal does once a call is answered."""
    completed = AssistantMessageCompleted(
        call_id=f"m{n}", message=Message.assistant("ok"), usage=Usage(input_tokens=5)
    )
    draft = RecordDraft(completed, time=format_time(clock.now()))
    await store.append(cid, [draft], expected_seq=await store.head(cid), fence=0)


async def _peer(store: MemoryStore, clock: ManualClock, most: int = 1) -> UsageRefusal | int:
    """What another worker's ask of one call under a budget of ``most`` calls is answered
    (its share given back after)."""
    start, end = period_bounds("day", clock.now())
    expires = clock.now() + timedelta(seconds=LEASE)
    ask = UsageAsk("acme", "peer", "peer", expires, (UsageLimit(start, end, model_calls=most),))
    answer = await store.reserve_usage(ask, now=clock.now())
    await store.release_usage("acme", holder="peer")
    return answer


async def _refused(store: MemoryStore, clock: ManualClock, most: int = 1) -> UsageRefusal:
    answer = await _peer(store, clock, most)
    assert isinstance(answer, UsageRefusal), answer
    return answer


async def test_most_calls_are_reserved_in_memory() -> None:
    """40 calls one after another under a large budget: the store is asked about once a
    share (each a few calls), not once a call, and every completion still counts."""
    store, clock = _Counted(), ManualClock()
    gate = _gate(store, clock, "w", model_calls=1000)
    cid = await _conversation(store, clock, "s")
    meter = tenant_budget_meter(clock.now)
    for n in range(40):
        share = await gate.reserve("acme", gate.of("acme"), meter)
        await _complete(store, clock, cid, n)
        gate.done(share, answered=True)
    assert len(store.asks) == -(-40 // SHARE_CALLS)
    assert {ask.calls for ask in store.asks} == {SHARE_CALLS}
    start, end = period_bounds("day", clock.now())
    spent = await store.tenant_usage("acme", start=start, end=end)
    assert spent.model_calls == 40


async def test_shares_never_overspend_and_the_last_calls_go_round() -> None:
    """Two workers on one store spend a budget of 10 calls: never more than 10 are made,
    the budget is used up, and each worker then stops (exhausted, not waiting forever)."""
    store, clock = _Counted(), ManualClock()
    gates = [_gate(store, clock, f"w{n}", model_calls=10) for n in range(2)]
    made = [0, 0]

    async def run(n: int) -> None:
        gate, cid = gates[n], await _conversation(store, clock, f"s{n}")
        meter = tenant_budget_meter(clock.now)
        while True:
            share = await gate.reserve("acme", gate.of("acme"), meter)
            await asyncio.sleep(0)  # the other worker goes meanwhile
            made[n] += 1
            await _complete(store, clock, cid, made[n])
            gate.done(share, answered=True)

    runs = [asyncio.create_task(run(n)) for n in range(2)]
    while not all(r.done() for r in runs):
        await clock.advance(1.0)
        for gate in gates:
            await gate.renew()  # their heartbeats: an idle share goes back
        await asyncio.sleep(0)
    for r in runs:
        with pytest.raises(BudgetExhausted):
            await r
    assert sum(made) == 10 and all(made)


async def test_parallel_calls_of_one_run_keep_their_own_reservations() -> None:
    """Two calls of one conversation in flight at once: the one that fails unanswered gives
    back its own reservation (to the share, for the run's next call), never the other's,
    which another worker still finds held; an answered call's completion releases none."""
    store, clock = _Counted(), ManualClock()
    gate = _gate(store, clock, "w", model_calls=2)
    cid = await _conversation(store, clock, "s")
    meter = tenant_budget_meter(clock.now)
    first = await gate.reserve("acme", gate.of("acme"), meter)
    second = await gate.reserve("acme", gate.of("acme"), meter)
    assert (await _refused(store, clock, 2)).reserved.calls == 2
    gate.done(first, answered=False)  # failed: its call goes back to the share
    await _complete(store, clock, cid, 2)  # the second's completion: it releases nothing
    refused = await _refused(store, clock, 2)
    assert refused.reserved.calls == 2 and refused.spent.model_calls == 1
    gate.done(second, answered=True)
    asks = len(store.asks)
    third = await gate.reserve("acme", gate.of("acme"), meter)  # the first's, unspent
    assert len(store.asks) == asks and third is first
    await _complete(store, clock, cid, 3)
    gate.done(third, answered=True)
    with pytest.raises(BudgetExhausted):
        await gate.reserve("acme", gate.of("acme"), meter)


async def test_a_long_call_keeps_its_reservation_across_leases() -> None:
    """A call that runs for many leases keeps its reservation while the worker's heartbeat
    renews it; another worker's ask finds it held all along; once the worker stops
    renewing (it died), it expires within a lease."""
    store, clock = MemoryStore(), ManualClock()
    gate = _gate(store, clock, "w", model_calls=1)
    meter = tenant_budget_meter(clock.now)
    share = await gate.reserve("acme", gate.of("acme"), meter)
    for _ in range(12):  # 120 s: four leases
        await clock.advance(LEASE / 3)
        await gate.renew()
        assert (await _refused(store, clock)).reserved.calls >= 1
    assert share.in_flight == 1
    await clock.advance(LEASE)  # no heartbeat since: its worker is gone
    assert await _peer(store, clock) == 1


async def test_an_idle_share_goes_back_at_the_next_heartbeat_and_on_close() -> None:
    """A share no call used for a whole heartbeat is given back (its calls are free for
    every worker), and so is every share when the runtime closes."""
    store, clock = MemoryStore(), ManualClock()
    gate = _gate(store, clock, "w", model_calls=2)
    meter = tenant_budget_meter(clock.now)
    share = await gate.reserve("acme", gate.of("acme"), meter)
    gate.done(share, answered=False)
    await gate.renew()  # used since the last heartbeat: kept
    assert (await _refused(store, clock)).reserved.calls == 1
    await gate.renew()
    assert await _peer(store, clock) == 1  # given back: the other worker's ask is granted
    share = await gate.reserve("acme", gate.of("acme"), meter)
    gate.done(share, answered=False)
    await gate.close()
    assert await _peer(store, clock) == 1
