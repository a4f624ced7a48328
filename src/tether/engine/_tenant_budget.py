"""Per-tenant budgets per period: what all of one tenant's runs may spend in a UTC day or
month, counted by the store's usage aggregate and reserved call by call, so that concurrent
runs of a tenant, on any worker, overspend by at most one call's worth (docs/budgets.md).

A worker reserves a share of calls at once (:data:`SHARE`, fewer near a limit: the store
sizes it) and spends it in memory; each reservation is the worker's (its ``holder``), so the
append of a call's completion, naming that holder, gives the call's back in its own commit.
What the append cannot give back (a completion never appended while the worker lives) is
given back when its attempt ends, and a share no call took from is given back at the next
heartbeat."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal, TypeAlias

from pydantic import model_validator

from tether.engine._budget import Budget, BudgetExhausted, BudgetMeter
from tether.engine._clock import Clock
from tether.engine._limits import ANY_TENANT
from tether.errors import TetherError
from tether.journal import ToolExecutor, ToolScope
from tether.messages import ModelRequest, ModelResponse, ToolCall, ToolResult
from tether.models import DeltaSink, Model, cost_of
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
    "TenantUsage",
    "UsageShare",
    "budget_of",
    "period_bounds",
    "tenant_budget_meter",
)

logger = logging.getLogger("tether.engine")

Period = Literal["day", "month"]

SHARE = 16
"""The calls a worker reserves at once when its share of a tenant's budget runs out (the
store grants fewer near a limit: never more than half of what is left)."""


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


class TenantBudgetGate:
    """This runtime's tenant budgets and the store's usage of them: one per runtime, shared
    by its runs. ``RuntimeConfig.tenant_budgets`` needs the store's ``usage`` capability
    (the runtime refuses to start without it)."""

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
        self._in_flight = 0
        self._pending = 0  # answered calls whose completion's append is not yet seen
        self._renewed_at: datetime | None = None
        self.holder = f"worker:{owner_id}"
        """Whose every reservation of this worker's is: its appends name it."""
        self._free: dict[_Key, _Share] = {}
        """Calls reserved and not yet taken, by tenant and the limits they were granted
        under."""
        self._taken: set[_Key] = set()
        """The shares a call took from since the last heartbeat's pass."""
        self._stale: list[tuple[str, int]] = []
        """Calls of shares a larger call left stale, to give back (by tenant)."""

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

    async def reserve(
        self, tenant: str, budgets: Sequence[TenantBudget], meter: BudgetMeter
    ) -> _Key:
        """Reserve one model call of ``tenant``'s: from this worker's share if it holds one
        (no store write), else a new share from the store, waiting while the calls in flight
        hold what is left; :class:`BudgetExhausted` if a budget is used up. The share the
        call took from (give it to :meth:`done`)."""
        store = self._store
        assert store is not None
        raised = meter.budget
        extended = bool(raised.model_calls or raised.tokens or raised.cost_usd)
        while True:
            now = self._clock.now()
            limits = self._limits(budgets, meter.budget, now)
            key = (tenant, limits)
            share = self._free.get(key)
            if share is not None and share.calls:
                share.calls -= 1
                self._taken.add(key)
                self._in_flight += 1
                return key
            expires = now + timedelta(seconds=self._lease)
            # A run a person let go past its tenant's budget reserves its calls one by one:
            # a share under its raised limits would serve no other run.
            calls = 1 if extended else SHARE
            found = await store.lease_usage(
                UsageAsk(tenant, self.holder, self._owner_id, expires, limits, calls), now=now
            )
            if not isinstance(found, UsageRefusal):
                share = self._free.setdefault(key, _Share(0, found.tokens, found.cost_usd))
                share.calls += found.calls - 1
                share.tokens = min(share.tokens, found.tokens) if share.calls else found.tokens
                share.cost_usd = (
                    min(share.cost_usd, found.cost_usd) if share.calls else found.cost_usd
                )
                self._taken.add(key)
                self._in_flight += 1
                return key
            if not found.waiting:
                raise _exhausted(tenant, budgets[found.index], found, "model", meter)
            await self._clock.sleep(self._poll)

    def done(
        self, key: _Key, answered: UsageShare | None, spent: tuple[int, float] = (0, 0.0)
    ) -> None:
        """A call reserved from the share ``key`` is over: an answered one's reservation is
        given back by the append of its completion (``answered`` counts it until then), an
        unanswered one's goes back to the share, for the next call. A call that ``spent``
        more tokens or dollars than the share's calls hold leaves the rest of the share
        stale: given back at the next heartbeat, the next call reserving anew (holding the
        larger call), as a call reserved alone would."""
        self._in_flight -= 1
        share = self._free.get(key)
        if answered is None:
            if share is not None:
                share.calls += 1
            return
        answered.answered += 1
        self._pending += 1
        if share is not None and (spent[0] > share.tokens or spent[1] > share.cost_usd):
            stale = self._free.pop(key)
            if stale.calls:
                self._stale.append((key[0], stale.calls))

    def appended(self, share: UsageShare, completions: int) -> None:
        """``completions`` of ``share``'s answered calls were appended, naming this worker:
        their reservations are given back."""
        share.appended += completions
        self._pending -= completions

    async def forget(self, tenant: str, share: UsageShare) -> None:
        """An attempt is over: give back the reservations of its answered calls whose
        completions it never appended (a conflict, a crash of the work), which no append will
        give back now."""
        left = share.answered - share.appended
        share.answered = share.appended
        if left <= 0 or self._store is None:
            return
        self._pending -= left
        try:
            await self._store.release_usage(tenant, holder=self.holder, calls=left)
        except TetherError:  # they expire within a lease of the worker's end
            logger.warning("could not give back usage reservations of %s", tenant, exc_info=True)

    async def give_back_shares(self, *, idle_only: bool = False) -> None:
        """Give back the calls this worker reserved and took no call for (``idle_only``: of
        the shares no call took from since the last pass), so that other workers may."""
        store = self._store
        if store is None:
            return
        taken = self._taken if idle_only else set()
        idle = [k for k, share in self._free.items() if share.calls and k not in taken]
        self._taken.clear()
        given = [(key[0], self._free.pop(key).calls) for key in idle]
        given += self._stale
        self._stale = []
        for tenant, calls in given:
            try:
                await store.release_usage(tenant, holder=self.holder, calls=calls)
            except TetherError:  # they expire within a lease
                logger.warning("could not give back a share of %s", tenant, exc_info=True)

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

    def _holding(self) -> bool:
        return (
            self._in_flight > 0
            or self._pending > 0
            or bool(self._stale)
            or any(s.calls for s in self._free.values())
        )

    async def renew(self) -> None:
        """Move this worker's reservations on by a lease, while it holds any: at the
        worker's heartbeat and at each of its runs' (once for them all within a sixth of a
        lease: one write renews every reservation of the worker). A share no call took from
        since the last pass is given back first."""
        if self._store is None or not self._holding():
            return
        now = self._clock.now()
        if self._renewed_at is not None and now - self._renewed_at < timedelta(
            seconds=self._lease / 6
        ):
            return
        self._renewed_at = now
        await self.give_back_shares(idle_only=True)
        if self._holding():
            until = now + timedelta(seconds=self._lease)
            await self._store.renew_usage(self._owner_id, expires_at=until)


def _plus(limit: int | None, more: int | None) -> int | None:
    return None if limit is None else limit + (more or 0)


def _plus_cost(limit: float | None, more: float | None) -> float | None:
    return None if limit is None else limit + (more or 0.0)


_NONE = UsageReserved()


_Key: TypeAlias = tuple[str, tuple[UsageLimit, ...]]
"""A share's tenant and the limits it was granted under."""


@dataclass(slots=True)
class _Share:
    """Calls reserved and not yet taken, each holding ``tokens`` and ``cost_usd``."""

    calls: int
    tokens: int
    cost_usd: float


@dataclass(slots=True)
class UsageShare:
    """One attempt's model calls on its worker's share of a tenant's budget: how many were
    answered, and how many of their completions its journal appended (each giving its
    reservation back)."""

    answered: int = 0
    appended: int = 0


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
        share: UsageShare,
        budgets: Sequence[TenantBudget],
        meter: BudgetMeter,
    ) -> None:
        self._inner = inner
        self._gate = gate
        self._tenant = tenant
        self._share = share
        self._budgets = budgets
        self._meter = meter
        self._counted = any(b.tokens is not None for b in budgets)
        self._priced = any(b.cost_usd is not None for b in budgets)

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        key = await self._gate.reserve(self._tenant, self._budgets, self._meter)
        answered: UsageShare | None = None
        spent: tuple[int, float] = (0, 0.0)
        try:
            response = await self._inner.request(request, stream)
            answered = self._share
            spent = _spent_by(request, response, self._counted, priced=self._priced)
            return response
        finally:
            self._gate.done(key, answered, spent)


def _spent_by(
    request: ModelRequest, response: ModelResponse, counted: bool, *, priced: bool
) -> tuple[int, float]:
    """A call's tokens and cost as the journal counts them, each only if a budget limits it
    (``counted``, ``priced``: else nothing, which no share's hold is under)."""
    usage = response.usage
    tokens = 0
    if counted and usage is not None:
        tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
    cost = response.cost if priced else None
    if cost is None and priced and usage is not None:
        cost = cost_of(request.model, usage)
    return tokens, cost or 0.0


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
