"""A rate-only key's permits leased several at once and spent in process (docs/limits.md):
fewer asks of the store than calls, every permit counted as a call at its lease's grant, so
no window of the rate's length holds more than the rate, and none spent after its hold."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from tether.engine import Limits, ManualClock
from tether.engine._limits import LimitGate
from tether.store import GrantTime, LimitAsk, MemoryStore


class _Spied(MemoryStore):
    """A memory store that keeps each grant's time and permits."""

    def __init__(self) -> None:
        super().__init__()
        self.grants: list[tuple[datetime, int]] = []
        self.returned: list[int] = []

    async def acquire_limit(self, ask: LimitAsk, *, now: GrantTime) -> datetime | None:
        read: list[datetime] = []

        def reading() -> datetime:
            read.append(now() if callable(now) else now)
            return read[-1]

        retry_at = await super().acquire_limit(ask, now=reading)
        if retry_at is None:
            self.grants.append((read[-1], ask.calls))
        return retry_at

    async def release_limit(self, key: str, *, holder: str, calls: int = 0) -> None:
        if calls:
            self.returned.append(calls)
        await super().release_limit(key, holder=holder, calls=calls)


def _gate(store: MemoryStore, clock: ManualClock, rate: tuple[int, float]) -> LimitGate:
    return LimitGate(
        store,
        agent_limits={},
        tenant_limits={},
        model_limits={"p": Limits(rate=rate)},
        clock=clock,
        owner_id="w",
        lease=30.0,
        poll=0.25,
    )


async def _call(gate: LimitGate) -> None:
    async with gate.call("p:m", "a", None):
        pass


async def test_permits_are_leased_in_batches_and_never_over_the_rate() -> None:
    """250 calls at a rate of 100 in 10 s: the store is asked far fewer times than there
    are calls, the leases grow with demand up to a 25th of the rate, and the permits
    granted in any 10 s (each counted at its lease's grant) are at most the rate."""
    store, clock = _Spied(), ManualClock()
    gate = _gate(store, clock, (100, 10))
    calls = asyncio.gather(*(_call(gate) for _ in range(250)))
    while not calls.done():
        await clock.advance(0.25)
        await asyncio.sleep(0)
    await calls
    assert sum(count for _, count in store.grants) >= 250
    assert len(store.grants) < 250 / 2
    assert max(count for _, count in store.grants) == 4  # 100 // 25
    for at, _ in store.grants:
        window = [n for t, n in store.grants if at <= t < at + timedelta(seconds=10)]
        assert sum(window) <= 100


async def test_a_leased_permit_is_not_spent_after_its_hold() -> None:
    """A lease's permits left unspent when its hold passes are dropped (counted, never
    spent late), and the next lease is smaller."""
    store, clock = _Spied(), ManualClock()
    gate = _gate(store, clock, (1000, 10))
    for _ in range(8):  # back to back: the leases grow
        await _call(gate)
    assert [n for _, n in store.grants] == [1, 2, 4, 8]
    granted = len(store.grants)
    await clock.advance(1.0)  # past the hold of the last lease (1% of 10 s)
    await _call(gate)
    assert len(store.grants) == granted + 1
    assert store.grants[-1][1] == 4  # 7 of 8 unspent: half the size
    assert store.returned == [7]  # and given back: their places are free for every worker


async def test_a_pause_drops_leased_permits() -> None:
    """A provider's ``Retry-After`` stops this worker's leased permits too: the next call
    asks the store, which holds it to the pause."""
    store, clock = _Spied(), ManualClock()
    gate = _gate(store, clock, (1000, 10))
    for _ in range(4):
        await _call(gate)
    assert [n for _, n in store.grants] == [1, 2, 4]  # 3 of the last 4 left
    await gate.pause("p:m", 5.0)
    waiting = asyncio.create_task(_call(gate))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    while not waiting.done():
        await clock.advance(0.5)
        await asyncio.sleep(0.01)
    await waiting
    assert store.grants[-1][0] >= clock.now() - timedelta(seconds=1)
