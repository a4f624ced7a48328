"""Per-tenant budgets per period: what all of one tenant's runs may spend in a UTC day or
month, counted by the store's usage aggregate and reserved in the store by each worker's
share of a few calls, spent call by call in memory, so that concurrent runs of a tenant, on
any worker, overspend by at most one call's worth (docs/budgets.md)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Final, Literal

from pydantic import model_validator

from tether.engine._budget import Budget, BudgetExhausted, BudgetMeter
from tether.engine._clock import Clock
from tether.engine._limits import ANY_TENANT
from tether.errors import TetherError
from tether.journal import ToolExecutor, ToolScope
from tether.messages import ModelRequest, ModelResponse, ToolCall, ToolResult
from tether.models import DeltaSink, Model
from tether.store import (
    UsageAsk,
    UsageLimit,
    UsageRefusal,
    UsageReserved,
    UsageSpent,
    UsageStore,
)

__all__ = (
    "Period",
    "TenantBudget",
    "TenantBudgetGate",
    "TenantBudgetedModel",
    "TenantBudgetedTools",
    "TenantShare",
    "TenantUsage",
    "budget_of",
    "period_bounds",
    "tenant_budget_meter",
)

logger = logging.getLogger("tether.engine")

Period = Literal["day", "month"]

SHARE_CALLS: Final = 8
"""At most this many model calls of a tenant's budget a worker asks the store for at once
(fewer near the end of the budget: the store grants at most half of what is left)."""


class TenantBudget(Budget):
    """What all of one tenant's runs together may spend per UTC calendar ``period`` (a
    ``day``, a ``month``): model calls, tokens, cost and tool calls (no ``wall_time``), set
    per tenant in ``RuntimeConfig.tenant_budgets`` (``"*"``: every tenant without its own).
    ``on_exhausted`` as any budget: ``settle`` (the default) or ``park``.

    Example::

        RuntimeConfig(tenant_budgets={
            "*": TenantBudget(cost_usd=5.0, period="day"),
            "acme": [TenantBudget(model_calls=1000), TenantBudget(cost_usd=100, period="month")],
        })
    """

    period: Period = "day"

    @model_validator(mode="after")
    def _no_wall_time(self) -> TenantBudget:
        if self.wall_time is not None:
            raise ValueError("a tenant budget has no wall_time: set it on each submission's")
        return self


def period_bounds(period: Period, at: datetime) -> tuple[date, date]:
    """The UTC days ``start <= day < end`` of the ``period`` that holds ``at``."""
    day = at.astimezone(UTC).date()
    if period == "day":
        return day, day + timedelta(days=1)
    start = day.replace(day=1)
    end = date(start.year + (start.month == 12), start.month % 12 + 1, 1)
    return start, end


def _budgets(
    given: TenantBudget | Sequence[TenantBudget] | None,
) -> tuple[TenantBudget, ...]:
    if given is None:
        return ()
    return (given,) if isinstance(given, TenantBudget) else tuple(given)


def budget_of(
    budgets: Mapping[str, TenantBudget | Sequence[TenantBudget]], tenant: str, period: Period
) -> TenantBudget | None:
    """``tenant``'s budget of ``period`` in ``budgets`` (its own, else every tenant's
    ``"*"``), if any; several of one period combine limit by limit, the first that sets one
    winning."""
    given = budgets.get(tenant)
    if given is None:
        given = budgets.get(ANY_TENANT)
    found: Budget | None = None
    for budget in _budgets(given):
        if budget.period == period:
            found = budget if found is None else found.over(budget)
    if found is None:
        return None
    return TenantBudget.model_validate({**found.model_dump(), "period": period})


@dataclass(frozen=True, slots=True)
class TenantUsage:
    """What a tenant spent in one UTC ``period`` (the days ``start <= day < end``) and the
    budget it spends from in that period, if any (``Runtime.tenant_usage``, ``GET /usage``)."""

    tenant: str
    period: Period
    start: date
    end: date
    spent: UsageSpent
    budget: TenantBudget | None


def tenant_budget_meter(now: Callable[[], datetime]) -> BudgetMeter:
    """A meter of a submission's extensions of its tenant's budgets (scope ``tenant``): its
    budget starts at nothing and grows by each approved extension read from the log (it
    is never checked itself: the store's usage is)."""
    return BudgetMeter(
        Budget(model_calls=0, tokens=0, cost_usd=0.0, tool_calls=0), now, scope="tenant"
    )


@dataclass(slots=True, eq=False)
class TenantShare:
    """A worker's share of a tenant's budget under one set of limits: the store holds a
    reservation for each of its calls (``holder``'s rows), granted and not started (``left``),
    or in flight; each call takes one here, in memory, and the next ask of the store, or the
    give-back of an idle share, replaces its rows with the calls still in flight."""

    holder: str
    expires_at: datetime
    left: int = 0
    in_flight: int = 0
    holds: int = 0
    """The tokens each of its calls holds: a call that spends more ends the share's use (the
    next call asks the store, which reads what was spent since)."""
    used: bool = False
    """A call took one since the last heartbeat (an idle share goes back to the store)."""
    asking: asyncio.Lock = field(default_factory=asyncio.Lock)


_ShareKey = tuple[str, tuple[UsageLimit, ...]]


class TenantBudgetGate:
    """This runtime's tenant budgets and the store's usage of them: one per runtime, shared
    by its runs, holding this worker's shares of its tenants' budgets.
    ``RuntimeConfig.tenant_budgets`` needs the store's ``usage`` capability (the runtime
    refuses to start without it)."""

    def __init__(
        self,
        store: UsageStore | None,
        budgets: Mapping[str, TenantBudget | Sequence[TenantBudget]],
        *,
        clock: Clock,
        owner_id: str,
        lease: float,
        poll: float,
    ) -> None:
        self._store = store
        self._budgets = {tenant: _budgets(given) for tenant, given in budgets.items()}
        self._clock = clock
        self._owner_id = owner_id
        self._lease = lease
        self._poll = poll
        self._shares: dict[_ShareKey, TenantShare] = {}
        self._numbers = itertools.count(1)
        self._unreleased: set[tuple[str, str]] = set()

    def of(self, tenant: str | None) -> tuple[TenantBudget, ...]:
        """The budgets ``tenant``'s runs spend from (none for a run of no tenant)."""
        if tenant is None or self._store is None:
            return ()
        found = self._budgets.get(tenant)
        return found if found is not None else self._budgets.get(ANY_TENANT, ())

    def _limits(
        self, budgets: Sequence[TenantBudget], extension: Budget, now: datetime
    ) -> tuple[UsageLimit, ...]:
        return tuple(
            UsageLimit(
                *period_bounds(b.period, now),
                model_calls=_plus(b.model_calls, extension.model_calls),
                tokens=_plus(b.tokens, extension.tokens),
                cost_usd=_plus_cost(b.cost_usd, extension.cost_usd),
            )
            for b in budgets
        )

    def _share(self, key: _ShareKey, now: datetime) -> TenantShare:
        share = self._shares.get(key)
        if share is None:
            holder = f"{self._owner_id}/{next(self._numbers)}"
            share = self._shares[key] = TenantShare(holder, now)
        return share

    async def reserve(
        self, tenant: str, budgets: Sequence[TenantBudget], meter: BudgetMeter
    ) -> TenantShare:
        """Reserve one model call of ``tenant``'s: from this worker's share of its budget
        if the share has one left, else from the store, which grants a new share (waiting
        while the calls in flight hold what is left); :class:`BudgetExhausted` if a budget
        is used up. Give the call back with :meth:`done`."""
        store = self._store
        assert store is not None
        while True:
            now = self._clock.now()
            limits = self._limits(budgets, meter.budget, now)
            share = self._share((tenant, limits), now)
            if share.left > 0 and now < share.expires_at:
                return _take(share)
            async with share.asking:  # one ask of the store per share at once
                now = self._clock.now()
                if share.left > 0 and now < share.expires_at:
                    return _take(share)  # another call's ask refilled it meanwhile
                expires = now + timedelta(seconds=self._lease)
                ask = UsageAsk(
                    tenant,
                    share.holder,
                    self._owner_id,
                    expires,
                    limits,
                    calls=SHARE_CALLS,
                    keep=share.in_flight,
                )
                decided = await store.reserve_usage(ask, now=now)
                share.expires_at = expires
                if not isinstance(decided, UsageRefusal):
                    share.left, share.holds = decided.calls, decided.tokens
                    return _take(share)
            assert isinstance(decided, UsageRefusal)
            if not decided.waiting:
                raise _exhausted(tenant, budgets[decided.index], decided, "model", meter)
            await self._clock.sleep(self._poll)

    def done(self, share: TenantShare, *, answered: bool, tokens: int = 0) -> None:
        """The call that ``share`` reserved is over: an unanswered one (it spent nothing)
        gives its call back to the share; an answered one (of ``tokens``) is counted by its
        completion's append, and its reservation goes at the share's next ask or give-back.
        One that spent more than its call held ends the share's use: the next call asks."""
        share.in_flight -= 1
        if not answered:
            share.left += 1
        elif tokens > share.holds:
            share.left = 0

    async def check_tool(
        self, tenant: str, budgets: Sequence[TenantBudget], meter: BudgetMeter
    ) -> None:
        """:class:`BudgetExhausted` if a ``tool_calls`` limit of ``tenant``'s is used up by
        the calls before this one (whose intent, durable before it runs, counts already)."""
        store = self._store
        assert store is not None
        now = self._clock.now()
        for budget in budgets:
            if budget.tool_calls is None:
                continue
            most = budget.tool_calls + (meter.budget.tool_calls or 0)
            start, end = period_bounds(budget.period, now)
            spent = await store.tenant_usage(tenant, start=start, end=end)
            # The call's intent is durable before it runs: the aggregate counts it already.
            if spent.tool_calls > most:
                used = spent.tool_calls - 1
                refused = UsageRefusal(0, "toolCalls", used, most, spent, _NONE, False)
                raise _exhausted(tenant, budget, refused, "tool", meter)

    async def renew(self) -> None:
        """This worker's heartbeat: give back each share no call used since the last one
        (nothing in flight), and move the others' reservations on by a lease."""
        store = self._store
        if store is None:
            return
        for key, share in list(self._shares.items()):
            if share.in_flight == 0 and not share.used and not share.asking.locked():
                del self._shares[key]
                self._unreleased.add((key[0], share.holder))
            share.used = False
        await self._give_back(store)
        if self._shares:
            until = self._clock.now() + timedelta(seconds=self._lease)
            await store.renew_usage(self._owner_id, expires_at=until)
            for share in self._shares.values():
                share.expires_at = until

    async def close(self) -> None:
        """Give back every share this worker holds (its runs are over)."""
        if self._store is None:
            return
        for (tenant, _), share in self._shares.items():
            self._unreleased.add((tenant, share.holder))
        self._shares.clear()
        await self._give_back(self._store)

    async def _give_back(self, store: UsageStore) -> None:
        for tenant, holder in list(self._unreleased):
            try:
                await store.release_usage(tenant, holder=holder)
            except TetherError:  # at the next heartbeat; or it expires within a lease
                logger.warning("could not give back a share of %s's budget", tenant, exc_info=True)
                return
            self._unreleased.discard((tenant, holder))


def _take(share: TenantShare) -> TenantShare:
    share.left -= 1
    share.in_flight += 1
    share.used = True
    return share


def _plus(limit: int | None, more: int | None) -> int | None:
    return None if limit is None else limit + (more or 0)


def _plus_cost(limit: float | None, more: float | None) -> float | None:
    return None if limit is None else limit + (more or 0.0)


_NONE = UsageReserved()


def _exhausted(
    tenant: str,
    budget: TenantBudget,
    refused: UsageRefusal,
    before: str,
    meter: BudgetMeter,
) -> BudgetExhausted:
    spent = refused.spent
    used = round(refused.used, 6) if isinstance(refused.used, float) else refused.used
    message = (
        f"tenant budget exhausted: {refused.limit} used {used} of {refused.max} this "
        f"{budget.period} before a {before} call ({spent.model_calls} model calls, "
        f"{spent.tokens} tokens, ${spent.cost_usd:.6f}, {spent.tool_calls} tool calls)"
    )
    return BudgetExhausted(
        message,
        {
            "scope": "tenant",
            "tenant": tenant,
            "period": budget.period,
            "limit": refused.limit,
            "used": used,
            "max": refused.max,
            "modelCalls": spent.model_calls,
            "tokens": spent.tokens,
            "costUsd": round(spent.cost_usd, 6),
            "toolCalls": spent.tool_calls,
        },
        park=budget.on_exhausted == "park" and not meter.rejected,
        meter=meter,
        budget=budget,
    )


class TenantBudgetedModel:
    """A model client whose every call first reserves against its tenant's budgets."""

    def __init__(
        self,
        inner: Model,
        gate: TenantBudgetGate,
        tenant: str,
        budgets: Sequence[TenantBudget],
        meter: BudgetMeter,
    ) -> None:
        self._inner = inner
        self._gate = gate
        self._tenant = tenant
        self._budgets = budgets
        self._meter = meter

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        share = await self._gate.reserve(self._tenant, self._budgets, self._meter)
        response: ModelResponse | None = None
        try:
            response = await self._inner.request(request, stream)
            return response
        finally:  # this call's own reservation, none other's
            usage = None if response is None else response.usage
            tokens = 0 if usage is None else (usage.input_tokens or 0) + (usage.output_tokens or 0)
            self._gate.done(share, answered=response is not None, tokens=tokens)


class TenantBudgetedTools:
    """A tool executor that checks its tenant's ``tool_calls`` budgets before each call the
    host runs."""

    def __init__(
        self,
        inner: ToolExecutor,
        gate: TenantBudgetGate,
        tenant: str,
        budgets: Sequence[TenantBudget],
        meter: BudgetMeter,
    ) -> None:
        self._inner = inner
        self._gate = gate
        self._tenant = tenant
        self._budgets = budgets
        self._meter = meter

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        if any(b.tool_calls is not None for b in self._budgets):
            await self._gate.check_tool(self._tenant, self._budgets, self._meter)
        return await self._inner.execute(call, scope)
