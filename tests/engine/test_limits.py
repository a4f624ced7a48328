"""Rate limits and concurrency (issue 41, item 2): an agent's and a tenant's runs in flight,
a model's calls, rate and tokens per minute, held across workers sharing a store, and a
provider's 429 ``Retry-After`` slowing every worker (docs/limits.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from tether.engine import LIMIT, Limits, ManualClock, Runtime
from tether.engine._limits import model_keys
from tether.errors import ProviderRateLimited
from tether.messages import Message, ModelRequest, ModelResponse, TextPart, Usage
from tether.models import DeltaSink
from tether.store import GrantTime, LimitAsk, Store, SubmissionStatus

from ..journal.harnesses import EchoHarness
from .agents import agent
from .conftest import FAST
from .waits import advance_until

Make = Callable[..., Runtime]
LONG = 600.0
"""A lease for the tests that move the clock on by seconds at a time while runs wait: their
heartbeats, on a loaded machine, must not fall a lease behind the clock."""


class Held:
    """A model whose calls wait until ``release`` is set, counting how many run at once and
    when each started (on the test's clock)."""

    def __init__(self, clock: ManualClock, *, tokens: int = 0, fail_first: float | None = None):
        self.clock = clock
        self.running = 0
        self.peak = 0
        self.started: list[datetime] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.tokens = tokens
        self.fail_first = fail_first

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        self.started.append(self.clock.now())
        if self.fail_first is not None and len(self.started) == 1:
            raise ProviderRateLimited("slow down", status=429, retry_after=self.fail_first)
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.entered.set()
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        message = Message(role="assistant", parts=(TextPart(text="done"),))
        usage = Usage(input_tokens=self.tokens // 2, output_tokens=self.tokens - self.tokens // 2)
        return ModelResponse(message=message, usage=usage)


async def _settle_all(runtime: Runtime, ids: list[str]) -> list[Any]:
    return [await runtime.wait(submission_id) for submission_id in ids]


async def _turns(clock: ManualClock, count: int = 10) -> None:
    """Let every runtime's claim loop take a few passes (each waits on the clock)."""
    for _ in range(count):
        await clock.advance(0.05)
        await asyncio.sleep(0.01)  # a real moment for the store's threads (SQLite, PostgreSQL)


# --- the limits themselves ------------------------------------------------------------


def test_limits_refuse_what_cannot_hold() -> None:
    for bad in (
        {"concurrency": 0},
        {"per_worker": -1},
        {"tokens_per_minute": 0},
        {"rate": (0, 60)},
        {"rate": (5, 0)},
        {"rate": (5, float("inf"))},
    ):
        with pytest.raises(ValueError):
            Limits(**bad)
    with pytest.raises(TypeError):
        Limits(concurrency=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Limits(rate=5)  # type: ignore[arg-type]
    assert Limits(rate=(5, 60)).limits_calls and not Limits(concurrency=2).limits_calls


def test_a_model_answers_to_its_own_key_and_its_providers() -> None:
    assert model_keys("openai:gpt-4o") == ("openai:gpt-4o", "openai")
    assert model_keys("test") == ("test",)
    assert model_keys(":odd") == (":odd",)


# --- runs in flight -------------------------------------------------------------------


async def test_an_agents_runs_in_flight_hold_across_workers(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """``concurrency=1`` over two workers: one run at a time, the others queued with the
    waiting reason ``limit``, each run in turn once the slot is given back."""
    model = Held(clock)
    definition = agent(EchoHarness(), model, limits=Limits(concurrency=1))
    async with make_runtime({"a": definition}) as one, make_runtime({"a": definition}) as two:
        ids = [
            (await one.dispatch("a", "acme", "go", session=f"s{n}")).submission_id for n in range(3)
        ]
        await asyncio.wait_for(model.entered.wait(), 30)
        await _turns(clock)
        infos = [await one.submission(i) for i in ids]
        running = [i for i in infos if i.status is SubmissionStatus.RUNNING]
        queued = [i for i in infos if i.status is SubmissionStatus.QUEUED]
        assert len(running) == 1 and len(queued) == 2
        assert all(i.waits_for_a_limit for i in queued)
        assert not running[0].waits_for_a_limit
        assert (await two.submission(queued[0].submission.id)).waits_for_a_limit
        assert model.peak == 1
        model.release.set()
        outcomes = await advance_until(clock, _settle_all(one, ids), 0.05)
        assert [o["status"] for o in outcomes] == ["succeeded"] * 3
        assert model.peak == 1
        assert not (await one.submission(ids[0])).waits_for_a_limit
    assert LIMIT == "limit"


async def test_a_tenants_runs_in_flight_are_limited_per_tenant(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """``tenant_limits={"*": ...}``: each tenant its own limit; an override for one."""
    model = Held(clock)
    limits = {"*": Limits(concurrency=1), "big": Limits(concurrency=2)}
    async with make_runtime({"a": agent(EchoHarness(), model)}, tenant_limits=limits) as runtime:
        ids = {
            (tenant, n): (
                await runtime.dispatch("a", f"{tenant}-i", "go", session=f"s{n}", tenant=tenant)
            ).submission_id
            for tenant in ("t1", "t2", "big")
            for n in range(2)
        }
        await asyncio.wait_for(model.entered.wait(), 30)
        await _turns(clock)
        statuses = {key: (await runtime.submission(i)).status for key, i in ids.items()}
        running = sorted(key for key, status in statuses.items() if status.value == "running")
        assert [key[0] for key in running].count("t1") == 1
        assert [key[0] for key in running].count("t2") == 1
        assert [key[0] for key in running].count("big") == 2
        assert model.peak == 4
        model.release.set()
        await advance_until(clock, _settle_all(runtime, list(ids.values())), 0.05)


async def test_per_worker_bounds_one_worker(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    model = Held(clock)
    definition = agent(EchoHarness(), model, limits=Limits(per_worker=1))
    async with make_runtime({"a": definition}) as runtime:
        ids = [
            (await runtime.dispatch("a", "acme", "go", session=f"s{n}")).submission_id
            for n in range(3)
        ]
        await asyncio.wait_for(model.entered.wait(), 30)
        await _turns(clock)
        assert model.running == 1
        model.release.set()
        await advance_until(clock, _settle_all(runtime, ids), 0.05)
        assert model.peak == 1


# --- model calls ----------------------------------------------------------------------


async def test_a_models_rate_is_never_exceeded(
    make_runtime: Make, store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rate=(2, 10)`` over two workers: never more than 2 calls granted in any 10 s of
    the clock the grants are measured on."""
    model = Held(clock)
    model.release.set()
    limits = {"test": Limits(rate=(2, 10))}
    definition = agent(EchoHarness(), model)
    granted: list[datetime] = []
    acquire = store.acquire_limit  # type: ignore[attr-defined]

    async def spied(ask: LimitAsk, *, now: GrantTime) -> datetime | None:
        read: list[datetime] = []

        def reading() -> datetime:  # the time the store decided at
            read.append(now() if callable(now) else now)
            return read[-1]

        retry_at: datetime | None = await acquire(ask, now=reading)
        if retry_at is None:
            granted.append(read[-1])
        return retry_at

    monkeypatch.setattr(store, "acquire_limit", spied)
    async with (
        make_runtime({"a": definition}, model_limits=limits, lease=LONG) as one,
        make_runtime({"a": definition}, model_limits=limits, lease=LONG) as two,
    ):
        ids = [
            (
                await (one if n % 2 else two).dispatch("a", "acme", "go", session=f"s{n}")
            ).submission_id
            for n in range(5)
        ]
        await advance_until(clock, _settle_all(one, ids), 0.5)
    assert len(model.started) == len(granted) == 5
    times = sorted(granted)
    for i in range(len(times) - 2):
        assert times[i + 2] - times[i] >= timedelta(seconds=10)
    assert times[-1] - times[0] < timedelta(seconds=30)  # and not much slower than the rate


async def test_tokens_per_minute_hold_the_next_call(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """Tokens count once a call answers: 80, then 160 (over 100), then nothing until the
    first call's 80 leave the minute."""
    model = Held(clock, tokens=80)
    model.release.set()
    limits = {"test": Limits(tokens_per_minute=100)}
    async with make_runtime(
        {"a": agent(EchoHarness(), model)}, model_limits=limits, lease=LONG
    ) as runtime:
        ids = [
            (await runtime.dispatch("a", "acme", f"go {n}", session="s")).submission_id
            for n in range(3)
        ]
        await advance_until(clock, _settle_all(runtime, ids), 1.0)
    first, _, third = model.started
    assert third - first >= timedelta(seconds=60)


async def test_a_429_retry_after_slows_every_worker(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """A provider's 429 with ``Retry-After: 30`` pauses its key: no call of any worker
    starts before the 30 s are over, not only the refused run's retry."""
    model = Held(clock, fail_first=30)
    model.release.set()
    limits = {"test": Limits()}  # a key to share the provider's pauses on
    definition = agent(EchoHarness(), model)
    async with (
        make_runtime({"a": definition}, model_limits=limits, lease=LONG) as one,
        make_runtime({"a": definition}, model_limits=limits, lease=LONG) as two,
    ):
        first = (await one.dispatch("a", "acme", "go", session="a")).submission_id
        while not model.started:
            await _turns(clock, 1)
        refused_at = model.started[0]
        second = (await two.dispatch("a", "acme", "go", session="b")).submission_id
        outcomes = await advance_until(clock, _settle_all(one, [first, second]), 1.0)
    assert [o["status"] for o in outcomes] == ["succeeded", "succeeded"]
    assert len(model.started) == 3
    assert all(at >= refused_at + timedelta(seconds=30) for at in model.started[1:])


async def test_a_run_aborted_while_it_waits_for_a_slot_leaves_none_behind(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """A call waiting for the model's one slot is cancelled with its run: it holds nothing
    after, and the slot goes to the next call once the first gives it back."""
    model = Held(clock)
    limits = {"test": Limits(concurrency=1)}
    async with make_runtime(
        {"a": agent(EchoHarness(), model)}, model_limits=limits, lease=LONG
    ) as runtime:
        first = (await runtime.dispatch("a", "acme", "go", session="a")).submission_id
        await asyncio.wait_for(model.entered.wait(), 30)
        waiting = (await runtime.dispatch("a", "acme", "go", session="b")).submission_id
        await _turns(clock)
        assert len(model.started) == 1  # the second call waits for the slot
        await runtime.abort_submission(waiting)
        aborted = await advance_until(clock, runtime.wait(waiting), 0.05)
        assert aborted["status"] == "aborted"
        limited: Any = store
        assert await limited.limit_slots("model:", now=clock.now()) == {"model:test": 1}
        model.release.set()
        third = (await runtime.dispatch("a", "acme", "go", session="c")).submission_id
        outcomes = await advance_until(clock, _settle_all(runtime, [first, third]), 0.05)
        assert [o["status"] for o in outcomes] == ["succeeded", "succeeded"]
        assert await limited.limit_slots("model:", now=clock.now()) == {}


async def test_a_runs_slots_come_and_go_with_claims(
    make_runtime: Make, store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's slots are taken in its claim's transaction and given back by a later claim's:
    no ask or release of its own (issue 41's CPU goal), never over the limit, and none held
    once the runtime stops."""
    model = Held(clock)
    model.release.set()
    asked: list[str] = []
    for name in ("acquire_limit", "release_limit"):
        method = getattr(store, name)

        async def spied(*args: Any, _method: Any = method, _name: str = name, **kw: Any) -> Any:
            asked.append(_name)
            return await _method(*args, **kw)

        monkeypatch.setattr(store, name, spied)
    definition = agent(EchoHarness(), model, limits=Limits(concurrency=2))
    async with make_runtime({"a": definition}) as runtime:
        ids = [
            (await runtime.dispatch("a", "acme", "go", session=f"s{n}")).submission_id
            for n in range(6)
        ]
        outcomes = await advance_until(clock, _settle_all(runtime, ids), 0.05)
        assert [o["status"] for o in outcomes] == ["succeeded"] * 6
        assert model.peak <= 2
        assert asked == []
    assert await store.limit_slots("agent:", now=clock.now()) == {}  # type: ignore[attr-defined]


async def test_a_slot_given_back_is_taken_at_once_by_the_next_run(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """``concurrency=1`` on one worker: a run's end starts the next at once, on a clock that
    never moves (its slot, still to be given back by the next claim, is not counted as
    held by that claim): no poll between two runs."""
    model = Held(clock)
    model.release.set()
    definition = agent(EchoHarness(), model, limits=Limits(concurrency=1))
    async with make_runtime({"a": definition}) as runtime:
        ids = [
            (await runtime.dispatch("a", "acme", "go", session=f"s{n}")).submission_id
            for n in range(4)
        ]
        outcomes = await asyncio.wait_for(_settle_all(runtime, ids), 60)
        assert [o["status"] for o in outcomes] == ["succeeded"] * 4
        assert model.peak == 1


async def test_a_limited_run_is_claimed_at_its_admission_while_a_slot_is_free(
    make_runtime: Make, store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of an agent with ``concurrency`` is claimed in its admission's commit, its slot
    taken there (no claim of its own); one admitted while the slot is held stays queued,
    waiting for the limit, and runs once the slot is given back."""
    model = Held(clock)
    admitted: list[SubmissionStatus] = []
    admit_and_claim = store.admit_and_claim  # type: ignore[attr-defined]

    async def spied(*args: Any, **kw: Any) -> Any:
        admission = await admit_and_claim(*args, **kw)
        admitted.append(admission.submission.status)
        return admission

    monkeypatch.setattr(store, "admit_and_claim", spied)
    definition = agent(EchoHarness(), model, limits=Limits(concurrency=1))
    async with make_runtime({"a": definition}) as runtime:
        await _turns(clock)  # its claim loop is up: an admission may claim
        first = (await runtime.dispatch("a", "acme", "go", session="s1")).submission_id
        assert admitted == [SubmissionStatus.RUNNING]
        assert await store.limit_slots("agent:", now=clock.now()) == {"agent:a": 1}  # type: ignore[attr-defined]
        second = (await runtime.dispatch("a", "acme", "go", session="s2")).submission_id
        assert admitted == [SubmissionStatus.RUNNING, SubmissionStatus.QUEUED]
        await asyncio.wait_for(model.entered.wait(), 30)
        assert (await runtime.submission(second)).waits_for_a_limit
        model.release.set()
        outcomes = await advance_until(clock, _settle_all(runtime, [first, second]), 0.05)
        assert [o["status"] for o in outcomes] == ["succeeded"] * 2
        assert model.peak == 1


@pytest.mark.postgres
async def test_a_slot_freed_on_another_worker_wakes_a_held_claim() -> None:
    """Two workers, each on its own connection, each serving one agent of a tenant limited to
    one run in flight, each on a clock that never moves (so no poll): the run held back on
    the second worker is claimed once the first worker's run ends, woken by the
    notification of the slot given back."""
    from tether.store.postgres import PostgresStore

    from ..postgres import fresh_schema, store_url

    schema = fresh_schema()
    stores = [await PostgresStore.open(store_url(schema)) for _ in range(2)]
    models = [Held(ManualClock()), Held(ManualClock())]
    settings: dict[str, Any] = {**FAST, "tenant_limits": {"acme": Limits(concurrency=1)}}
    try:
        async with (
            Runtime(
                {"x": agent(EchoHarness(), models[0])}, stores[0], clock=ManualClock(), **settings
            ) as one,
            Runtime(
                {"y": agent(EchoHarness(), models[1])}, stores[1], clock=ManualClock(), **settings
            ) as two,
        ):
            first = (await one.dispatch("x", "i", "go", tenant="acme")).submission_id
            await asyncio.wait_for(models[0].entered.wait(), 30)
            second = (await two.dispatch("y", "i", "go", tenant="acme")).submission_id
            assert (await two.submission(second)).waits_for_a_limit
            models[1].release.set()
            models[0].release.set()
            assert (await asyncio.wait_for(one.wait(first), 60))["status"] == "succeeded"
            assert (await asyncio.wait_for(two.wait(second), 60))["status"] == "succeeded"
    finally:
        for opened in stores:
            await opened.close()
