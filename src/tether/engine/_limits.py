"""Rate limits and concurrency across workers (docs/limits.md): ``Limits`` per agent, per
tenant and per model or provider, kept in the store's ``limits`` capability so that they
hold across every worker sharing it, and the gate that enforces them: a run's slot at its
claim, a model call's slot, rate and tokens at the call, a provider's ``Retry-After`` as a
pause for every worker.

Where each limit counts: ``concurrency`` and ``per_worker`` count what the limit is set on
(an agent's or a tenant's runs in flight, a model's or provider's calls in flight); ``rate``
and ``tokens_per_minute`` always count model calls (an agent's, a tenant's, a model's).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from tether._ids import new_ulid
from tether.engine._clock import Clock
from tether.errors import ProviderError, ProviderRateLimited, TetherError
from tether.messages import ModelRequest, ModelResponse
from tether.models import DeltaSink, Model
from tether.store import ClaimSlots, HeldBack, LimitAsk, LimitStore, Submission

__all__ = (
    "ANY_TENANT",
    "LIMIT",
    "LimitGate",
    "LimitedModel",
    "Limits",
    "model_keys",
)

logger = logging.getLogger("tether.engine")

LIMIT: Final = "limit"
"""The waiting reason of a queued submission held back by a limit (its agent's or its
tenant's runs in flight are at their ``concurrency``): queued-for-limit."""
ANY_TENANT: Final = "*"
"""The key of ``RuntimeConfig.tenant_limits`` that every tenant without its own takes."""
_AGENT: Final = "agent:"
_TENANT: Final = "tenant:"
_AGENT_CALLS: Final = "agent-calls:"
_TENANT_CALLS: Final = "tenant-calls:"
_MODEL: Final = "model:"


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits of an agent, a tenant or a model (``None``: no such limit).

    ``concurrency``: at most this many at once across every worker (an agent's or a
    tenant's runs; a model's calls); ``per_worker``: at most this many at once on one
    worker; ``rate``: ``(n, per_seconds)``, at most ``n`` model calls in any ``per_seconds``
    (a sliding window, never over); ``tokens_per_minute``: no model call starts while the
    calls of the last minute spent this many input and output tokens.

    Example::

        AgentDefinition(build, limits=Limits(concurrency=4, per_worker=1))
        App(agents, model_limits={"openai": Limits(rate=(500, 60), tokens_per_minute=200_000)},
            tenant_limits={"*": Limits(concurrency=2), "acme": Limits(concurrency=10)})
    """

    concurrency: int | None = None
    per_worker: int | None = None
    rate: tuple[int, float] | None = None
    tokens_per_minute: int | None = None

    def __post_init__(self) -> None:
        for name in ("concurrency", "per_worker", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} must be an int or None, not {value!r}")
            if value is not None and value < 1:
                raise ValueError(f"{name} must be 1 or more, not {value}")
        if self.rate is not None:
            if not isinstance(self.rate, tuple) or len(self.rate) != 2:
                raise TypeError(f"rate must be (n, per_seconds), not {self.rate!r}")
            count, per = self.rate
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise ValueError(f"rate's n must be an int of 1 or more, not {count!r}")
            if not (isinstance(per, int | float) and math.isfinite(per) and per > 0):
                raise ValueError(f"rate's per_seconds must be more than 0, not {per!r}")

    @property
    def limits_calls(self) -> bool:
        """Whether it counts model calls (a rate or tokens per minute)."""
        return self.rate is not None or self.tokens_per_minute is not None


def model_keys(model: str) -> tuple[str, ...]:
    """The keys of ``RuntimeConfig.model_limits`` a call to ``model`` answers to, most
    specific first: ``"openai:gpt-4o"`` -> ``("openai:gpt-4o", "openai")``."""
    provider, sep, _ = model.partition(":")
    return (model, provider) if sep and provider else (model,)


def _start_margin(per: float) -> float:
    """What a call's place in its rate's window is held past ``per``: room for the grant's
    commit and the call's start (a provider counts when a request arrives, a moment after
    the grant), so that no window a provider sees holds more than the rate. 2% of the
    window, at most a tenth of a second (measured: benchmarks/limits.py)."""
    return min(per * 0.02, 0.1)


_LEASE_SHARE: Final = 25
"""A lease of a rate's permits takes at most a 25th of the rate (4%): what leased permits
left unused can keep from other workers in a window."""
_LEASE_MAX: Final = 64


def _lease_hold(per: float) -> float:
    """How long a lease's permits may be spent after their grant: 1% of the window, at most a
    second. The grant counts each for ``per`` plus the start margin plus this, so that no
    window a provider sees holds more than the rate, however late in the hold a permit is
    spent (a lease's places are kept 1% longer: the rate's use is at most 1% lower)."""
    return min(per * 0.01, 1.0)


@dataclass(slots=True)
class _Permits:
    """The permits of one rate-only key leased by this worker (granted by the store in one
    ask, counted as calls when granted) and not spent yet."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held while a lease is asked for: the key's other calls here wait and spend it."""
    left: int = 0
    until: datetime | None = None
    """When the lease's permits may no longer be spent (``None``: no lease)."""
    size: int = 0
    holder: str = ""
    """The lease's holder in the store (its row of calls)."""
    batch: int = 1
    """How many the next lease asks for: doubled when a lease runs out within its hold,
    halved when one ends with half or more unspent."""
    unspent: tuple[str, int] | None = None
    """A lease that ended with permits unspent (its holder, how many): given back to the
    store before the next lease, so that other workers may use their places."""

    def take(self, now: datetime, cap: int) -> bool:
        if self.until is None:
            return False
        if now < self.until:
            if self.left > 0:
                self.left -= 1
                return True
            self.batch = min(self.size * 2, cap)  # run out: demand outpaces the lease
        elif self.left * 2 >= self.size:
            self.batch = max(1, self.size // 2)  # half or more unspent: too big a lease
        self.drop()
        return False

    def leased(self, size: int, until: datetime, holder: str) -> None:
        self.left, self.until, self.size, self.holder = size - 1, until, size, holder

    def drop(self) -> None:
        """The lease ends: no permit of it is spent from now on."""
        if self.left > 0:
            self.unspent = (self.holder, self.left)
        self.left, self.until = 0, None


def _lease_cap(rate: int) -> int:
    return max(1, min(rate // _LEASE_SHARE, _LEASE_MAX))


@dataclass(frozen=True, slots=True)
class _Rule:
    key: str
    limits: Limits
    counts_slots: bool
    """Whether its ``concurrency`` is taken here (a run's limits at the run, a model's at
    the call)."""

    @property
    def leases(self) -> bool:
        """Whether its grants are only a rate's (no slot, no tokens per minute to look at
        per call): then permits are leased several at once and spent in process."""
        limits = self.limits
        return (
            limits.rate is not None
            and limits.tokens_per_minute is None
            and (limits.concurrency is None or not self.counts_slots)
        )


class LimitGate:
    """This runtime's limits and the store's holds of them: one per runtime, shared by its
    runs. Without the store's ``limits`` capability only ``per_worker`` holds (in
    process); the runtime refuses to start with shared limits on such a store."""

    def __init__(
        self,
        store: LimitStore | None,
        *,
        agent_limits: Mapping[str, Limits],
        tenant_limits: Mapping[str, Limits],
        model_limits: Mapping[str, Limits],
        clock: Clock,
        owner_id: str,
        lease: float,
        poll: float,
    ) -> None:
        self._store = store
        self._agents = dict(agent_limits)
        self._tenants = dict(tenant_limits)
        self._models = dict(model_limits)
        self._clock = clock
        self._owner_id = owner_id
        self._lease = lease
        self._poll = poll
        self._local: Counter[str] = Counter()
        """Slots of each key held in this process (``per_worker``, and whether to renew)."""
        self._local_wait = asyncio.Condition()
        self._calls = 0
        """Model calls holding the store's slots here (renewed while they last)."""
        self._unreleased: set[tuple[str, str]] = set()
        """Slots whose giving back failed (the store was away): given back at the next
        renewal, so that a renewal never keeps them alive."""
        self._permits: dict[str, _Permits] = {}
        """Leased permits of rate-only keys (see :class:`_Permits`), by key."""
        self._limits_runs = any(
            limits.concurrency is not None or limits.per_worker is not None
            for limits in (*self._agents.values(), *self._tenants.values())
        )
        self._shares_runs = any(
            limits.concurrency is not None
            for limits in (*self._agents.values(), *self._tenants.values())
        )
        self._give_back: list[tuple[str, str]] = []
        """Slots of runs that ended, given back by the next claim's transaction."""
        self.defers_give_back = False
        """Whether a claim loop runs to give back what runs leave (else at once)."""

    @property
    def configured(self) -> bool:
        return bool(self._agents or self._tenants or self._models)

    @property
    def limits_runs(self) -> bool:
        """Whether claims must ask: an agent or a tenant has a ``concurrency`` or
        ``per_worker``."""
        return self._limits_runs

    def may_hold_back(self, agent: str) -> bool:
        """Whether a run of ``agent`` may be held back by a limit (its own, or its
        tenant's): then it is admitted for a claim to take, never claimed at admission."""
        limits = self._agents.get(agent)
        own = limits is not None and bool(limits.concurrency or limits.per_worker)
        return own or any(t.concurrency or t.per_worker for t in self._tenants.values())

    def _tenant(self, tenant: str | None) -> Limits | None:
        if tenant is None:
            return None
        return self._tenants.get(tenant, self._tenants.get(ANY_TENANT))

    def _run_rules(self, submission: Submission) -> list[_Rule]:
        rules: list[_Rule] = []
        agent = self._agents.get(submission.key.agent)
        if agent is not None and (agent.concurrency or agent.per_worker):
            rules.append(_Rule(_AGENT + submission.key.agent, agent, True))
        tenant = self._tenant(submission.tenant)
        if tenant is not None and (tenant.concurrency or tenant.per_worker):
            rules.append(_Rule(_TENANT + str(submission.tenant), tenant, True))
        return rules

    def _call_rules(self, model: str, agent: str, tenant: str | None) -> list[_Rule]:
        rules = [
            _Rule(_MODEL + key, self._models[key], True)
            for key in model_keys(model)
            if key in self._models
        ]
        agent_limits = self._agents.get(agent)
        if agent_limits is not None and agent_limits.limits_calls:
            rules.append(_Rule(_AGENT_CALLS + agent, agent_limits, False))
        tenant_limits = self._tenant(tenant)
        if tenant_limits is not None and tenant_limits.limits_calls:
            rules.append(_Rule(_TENANT_CALLS + str(tenant), tenant_limits, False))
        return rules

    # --- runs -------------------------------------------------------------------------

    async def held_back(self) -> HeldBack | None:
        """The agents and tenants whose runs are at their limit, here (``per_worker``) or
        across every worker (``concurrency``, the store's slots): what a claim passes over."""
        if not self.limits_runs:
            return None
        agents = {
            key.removeprefix(_AGENT)
            for key, held in self._local.items()
            if key.startswith(_AGENT)
            and (limits := self._agents.get(key.removeprefix(_AGENT))) is not None
            and limits.per_worker is not None
            and held >= limits.per_worker
        }
        tenants = {
            key.removeprefix(_TENANT)
            for key, held in self._local.items()
            if key.startswith(_TENANT)
            and (limits := self._tenant(key.removeprefix(_TENANT))) is not None
            and limits.per_worker is not None
            and held >= limits.per_worker
        }
        store = self._store
        if store is not None:
            now = self._clock.now()
            # The slots of runs ended here are free: the claim gives them back first.
            leaving = Counter(key for key, _ in self._give_back)
            if any(limits.concurrency for limits in self._agents.values()):
                for key, held in (await store.limit_slots(_AGENT, now=now)).items():
                    held -= leaving[key]
                    name = key.removeprefix(_AGENT)
                    limits = self._agents.get(name)
                    if limits is not None and limits.concurrency and held >= limits.concurrency:
                        agents.add(name)
            if any(limits.concurrency for limits in self._tenants.values()):
                for key, held in (await store.limit_slots(_TENANT, now=now)).items():
                    held -= leaving[key]
                    name = key.removeprefix(_TENANT)
                    limits = self._tenant(name)
                    if limits is not None and limits.concurrency and held >= limits.concurrency:
                        tenants.add(name)
        held_back = HeldBack(frozenset(agents), frozenset(tenants))
        return held_back or None

    @staticmethod
    def held_by(held: HeldBack | None, submission: Submission) -> str | None:
        """Whose limit holds a queued ``submission`` back (the waiting reason
        :data:`LIMIT`), by what :meth:`held_back` found (read once for many submissions):
        ``agent`` (its agent's runs in flight are at their limit), else ``tenant`` (its
        tenant's), else ``None``. Only an agent or a tenant with a limit of runs is held."""
        if held is None:
            return None
        if submission.key.agent in held.agents:
            return "agent"
        tenant = submission.tenant
        return "tenant" if tenant is not None and tenant in held.tenants else None

    def claim_slots(self) -> ClaimSlots | None:
        """What a claim takes in its own transaction: the ``concurrency`` slots of the runs it
        claims (their agent's and tenant's), and first gives back the slots of runs that
        ended (``None``: no such limit, or no store to keep them)."""
        if self._store is None or not self._shares_runs:
            return None
        give_back, self._give_back = tuple(self._give_back), []
        until = self._clock.now() + timedelta(seconds=self._lease)
        owner = self._owner_id

        def asks(submission: Submission) -> list[LimitAsk]:
            holder = str(submission.attempt_id)
            return [
                LimitAsk(rule.key, holder, owner, until, concurrency=rule.limits.concurrency)
                for rule in self._run_rules(submission)
                if rule.limits.concurrency is not None
            ]

        return ClaimSlots(asks, give_back)

    def claim_failed(self, slots: ClaimSlots) -> None:
        """The claim given ``slots`` failed: what it was to give back goes with the next."""
        self._give_back.extend(slots.give_back)

    def forget_claimed(self, submission: Submission) -> None:
        """A run whose claim took its slots is given back unstarted: so are its slots."""
        holder = str(submission.attempt_id)
        for rule in self._run_rules(submission):
            if rule.limits.concurrency is not None:
                self._give_back.append((rule.key, holder))

    async def flush_give_back(self) -> None:
        """Give back at once what waits for a claim (none is coming)."""
        store = self._store
        while self._give_back and store is not None:
            key, holder = self._give_back[0]
            await store.release_limit(key, holder=holder)
            del self._give_back[0]

    async def take_run(self, submission: Submission, *, claimed: bool = False) -> bool:
        """Take the slots of a claimed run's agent and tenant (its attempt holds them), or
        none and ``False`` if one is at its limit: the claim is then given back.
        ``claimed``: its claim took its ``concurrency`` slots (:meth:`claim_slots`), only
        this worker's ``per_worker`` is left to take."""
        rules = self._run_rules(submission)
        if not rules:
            return True
        for rule in rules:
            limit = rule.limits.per_worker
            if limit is not None and self._local[rule.key] >= limit:
                if claimed:
                    self.forget_claimed(submission)
                return False
        for rule in rules:  # counted before the store is asked: runs start side by side
            self._local[rule.key] += 1
        if claimed:
            return True
        try:
            granted = await self._ask_all(rules, str(submission.attempt_id), pauses=False)
        except BaseException:  # cancelled, or the store failed: nothing is left taken
            self._drop_local(rules)
            raise
        if granted is None:
            return True
        self._drop_local(rules)
        return False

    async def give_back_run(self, submission: Submission) -> bool:
        """Give back what :meth:`take_run` took (when the run ends, however it ends);
        whether it took anything (then a claim may now take what was held back)."""
        rules = self._run_rules(submission)
        if not rules:
            return False
        self._drop_local(rules)
        if self.defers_give_back and self._store is not None:
            self.forget_claimed(submission)  # given back by the next claim, in its transaction
        else:
            await self._release(rules, str(submission.attempt_id))
        return True

    def _drop_local(self, rules: Iterable[_Rule]) -> None:
        for rule in rules:
            self._local[rule.key] -= 1
            if self._local[rule.key] <= 0:
                del self._local[rule.key]

    # --- model calls ------------------------------------------------------------------

    def model(self, inner: Model, submission: Submission) -> Model:
        """``inner``, its calls limited as this runtime's limits say (``inner`` itself when
        no limit applies to anything this submission may call)."""
        if not self.configured:
            return inner
        return LimitedModel(inner, self, submission.key.agent, submission.tenant)

    @contextlib.asynccontextmanager
    async def call(self, model: str, agent: str, tenant: str | None) -> AsyncIterator[_Call]:
        """Hold what one model call needs for its length: wait (on the runtime's clock,
        never blocking the loop) until every limit grants it, then give the slots back."""
        rules = self._call_rules(model, agent, tenant)
        if not rules:
            yield _Call(self, ())
            return
        holder = new_ulid()
        async with self._local_slots(rules):
            while True:
                retry_at = await self._ask_all(rules, holder, pauses=True)
                if retry_at is None:
                    break
                await self._wait_until(retry_at)
            self._calls += 1
            try:
                yield _Call(self, rules)
            finally:
                self._calls -= 1
                await self._release(rules, holder)

    @contextlib.asynccontextmanager
    async def _local_slots(self, rules: Sequence[_Rule]) -> AsyncIterator[None]:
        """This worker's ``per_worker`` slots of the model keys, waited for in process."""
        bounded = [r for r in rules if r.counts_slots and r.limits.per_worker is not None]
        if not bounded:
            yield
            return
        async with self._local_wait:
            await self._local_wait.wait_for(
                lambda: all(self._local[r.key] < (r.limits.per_worker or 0) for r in bounded)
            )
            for rule in bounded:
                self._local[rule.key] += 1
        try:
            yield
        finally:
            async with self._local_wait:
                self._drop_local(bounded)
                self._local_wait.notify_all()

    async def spend(self, rules: Iterable[_Rule], tokens: int) -> None:
        store = self._store
        if store is None or tokens <= 0:
            return
        now = self._clock.now()
        for rule in rules:
            if rule.limits.tokens_per_minute is not None:
                await store.spend_limit(rule.key, tokens=tokens, now=now)

    async def pause(self, model: str, retry_after: float) -> None:
        """A provider's ``Retry-After``: no call to ``model``'s provider (nor to ``model``),
        from any worker, starts before it is over. Only the keys a limit is set on are
        paused (set one, ``Limits()`` will do, to share a provider's 429s)."""
        store = self._store
        if store is None:
            return
        until = self._clock.now() + timedelta(seconds=max(retry_after, 0.0))
        for key in model_keys(model):
            if key in self._models:
                permits = self._permits.get(_MODEL + key)
                if permits is not None:
                    permits.drop()  # this worker's leased permits wait out the pause too
                await store.pause_limit(_MODEL + key, until=until)

    # --- the store --------------------------------------------------------------------

    async def _ask_all(
        self, rules: Sequence[_Rule], holder: str, *, pauses: bool
    ) -> datetime | None:
        """Ask for every rule's grant in turn (``pauses``: a rule with no limit of its own
        is asked too, for a provider's pause kept on its key). All granted: ``None``; one
        refused: give back what was taken, and answer when to ask again."""
        store = self._store
        if store is None:
            return None
        try:
            return await self._ask_each(rules, holder, pauses)
        except BaseException:
            # Cancelled (a run aborted) or failed midway: give back every slot this holder
            # may hold, the one whose grant committed as the error came included.
            await self._release(rules, holder)
            raise

    async def _ask_each(self, rules: Sequence[_Rule], holder: str, pauses: bool) -> datetime | None:
        store = self._store
        assert store is not None
        clock = self._clock
        now = clock.now()
        taken: list[_Rule] = []
        for rule in rules:
            if rule.leases:
                retry_at = await self._permit(rule, holder)
                if retry_at is not None:
                    await self._release(taken, holder)
                    return retry_at
                continue
            limits = rule.limits
            concurrency = limits.concurrency if rule.counts_slots else None
            rate, per = limits.rate if limits.rate is not None else (None, None)
            if per is not None:
                per += _start_margin(per)
            if concurrency is None and rate is None and limits.tokens_per_minute is None:
                if not pauses:
                    continue
            ask = LimitAsk(
                rule.key,
                holder,
                self._owner_id,
                now + timedelta(seconds=self._lease),
                concurrency=concurrency,
                rate=rate,
                per_seconds=per,
                tokens_per_minute=limits.tokens_per_minute,
            )
            # The clock read once the key is locked: a grant that waited for other
            # workers' is counted from when it was decided, not from when it was asked.
            retry_at = await store.acquire_limit(ask, now=clock.now)
            if retry_at is not None:
                await self._release(taken, holder)
                return retry_at
            taken.append(rule)
        return None

    async def _permit(self, rule: _Rule, holder: str) -> datetime | None:
        """A permit of a rate-only ``rule``: one leased earlier and not spent, else a new
        lease of a batch of them (all counted as calls at its grant, each spent within
        :func:`_lease_hold` of it), else one alone if the batch does not fit the window."""
        store = self._store
        assert store is not None
        clock = self._clock
        permits = self._permits.get(rule.key)
        if permits is None:
            permits = self._permits[rule.key] = _Permits()
        async with permits.lock:
            rate, per = rule.limits.rate or (1, 1.0)
            cap = _lease_cap(rate)
            if permits.take(clock.now(), cap):
                return None
            if permits.unspent is not None:
                await self._give_back_unspent(rule.key, permits)
            hold = _lease_hold(per)
            decided: list[datetime] = []

            def now() -> datetime:  # read once the key is locked: the lease's grant time
                decided.append(clock.now())
                return decided[-1]

            batch = min(permits.batch, cap)
            while True:
                ask = LimitAsk(
                    rule.key,
                    holder,
                    self._owner_id,
                    clock.now() + timedelta(seconds=self._lease),
                    rate=rate,
                    per_seconds=per + _start_margin(per) + (hold if batch > 1 else 0.0),
                    calls=batch,
                )
                retry_at = await store.acquire_limit(ask, now=now)
                if retry_at is None:
                    break
                if batch == 1:
                    return retry_at
                batch = 1  # the window has room for fewer than a batch: one, as unleased
            permits.leased(batch, decided[-1] + timedelta(seconds=hold), holder)
            return None

    async def _give_back_unspent(self, key: str, permits: _Permits) -> None:
        """A lease's permits never spent (its hold passed, or a pause): their places in the
        window are freed for every worker (never spent now, so never over the rate)."""
        assert self._store is not None and permits.unspent is not None
        holder, count = permits.unspent
        permits.unspent = None
        try:
            await self._store.release_limit(key, holder=holder, calls=count)
        except TetherError:  # kept until its window ends: fewer calls, never more
            logger.warning("could not give back unspent permits of %s", key, exc_info=True)

    async def _release(self, rules: Iterable[_Rule], holder: str) -> None:
        store = self._store
        if store is None:
            return
        for rule in rules:
            if rule.counts_slots and rule.limits.concurrency is not None:
                try:
                    await store.release_limit(rule.key, holder=holder)
                except TetherError:  # given back at the next renewal, else it expires
                    self._unreleased.add((rule.key, holder))
                    logger.warning("could not give back a slot of %s", rule.key, exc_info=True)

    async def _wait_until(self, retry_at: datetime) -> None:
        remaining = (retry_at - self._clock.now()).total_seconds()
        await self._clock.sleep(min(max(remaining, 0.001), self._poll))

    async def renew(self) -> None:
        """Move this worker's slots on by a lease (its heartbeat), if it holds any."""
        store = self._store
        if store is None:
            return
        for key, holder in list(self._unreleased):
            await store.release_limit(key, holder=holder)
            self._unreleased.discard((key, holder))
        if not self.holds_slots:
            return
        until = self._clock.now() + timedelta(seconds=self._lease)
        await store.renew_limits(self._owner_id, expires_at=until)

    @property
    def holds_slots(self) -> bool:
        return bool(self._local) or self._calls > 0

    async def forget_owner(self, owner_id: str) -> None:
        """Give back every slot of a worker known dead (its liveness lock is free)."""
        if self._store is not None:
            await self._store.release_owner_limits(owner_id)


@dataclass(frozen=True, slots=True)
class _Call:
    gate: LimitGate
    rules: Sequence[_Rule]

    async def spent(self, tokens: int) -> None:
        await self.gate.spend(self.rules, tokens)


class LimitedModel:
    """A model client whose calls wait for the limits on them (see :meth:`LimitGate.call`),
    count their tokens, and turn a provider's 429 ``Retry-After`` into a pause for every
    worker calling that provider."""

    def __init__(self, inner: Model, gate: LimitGate, agent: str, tenant: str | None) -> None:
        self._inner = inner
        self._gate = gate
        self._agent = agent
        self._tenant = tenant

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        async with self._gate.call(request.model, self._agent, self._tenant) as call:
            try:
                response = await self._inner.request(request, stream)
            except ProviderError as exc:
                limited = isinstance(exc, ProviderRateLimited) or exc.status == 429
                if limited and exc.retry_after is not None:
                    await self._gate.pause(request.model, exc.retry_after)
                raise
            usage = response.usage
            if usage is not None and call.rules:
                await call.spent((usage.input_tokens or 0) + (usage.output_tokens or 0))
            return response
