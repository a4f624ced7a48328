"""What ``GET /usage`` answers: a tenant's spending in a UTC day or month against the budget
it spends from then, or a session's against its session budget (docs/budgets.md)."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import Field, RootModel

from tether.engine import Budget, SessionSpend, SubmissionSpend, TenantUsage
from tether.http._responses import WireResponse
from tether.store import UsageSpent

__all__ = (
    "SessionUsageReport",
    "SubmissionUsageReport",
    "UsageAmounts",
    "UsageAnswer",
    "UsageLimits",
    "UsageReport",
)


class UsageAmounts(WireResponse):
    """What was spent: model calls, tokens (input plus output), cost in US dollars (of the
    calls whose price is known), tool calls (those the host runs)."""

    model_calls: int
    tokens: int
    cost_usd: float
    tool_calls: int

    @classmethod
    def of(cls, spent: UsageSpent) -> UsageAmounts:
        return cls(
            model_calls=spent.model_calls,
            tokens=spent.tokens,
            cost_usd=round(spent.cost_usd, 6),
            tool_calls=spent.tool_calls,
        )


class UsageLimits(WireResponse):
    """A limit (or what is left of it) for each amount; ``null``: unlimited."""

    model_calls: int | None
    tokens: int | None
    cost_usd: float | None
    tool_calls: int | None

    @classmethod
    def of(cls, budget: Budget) -> UsageLimits:
        return cls(
            model_calls=budget.model_calls,
            tokens=budget.tokens,
            cost_usd=budget.cost_usd,
            tool_calls=budget.tool_calls,
        )

    @classmethod
    def left(cls, budget: Budget, spent: UsageSpent) -> UsageLimits:
        def rest(limit: int | None, used: int) -> int | None:
            return None if limit is None else max(limit - used, 0)

        cost = budget.cost_usd
        return cls(
            model_calls=rest(budget.model_calls, spent.model_calls),
            tokens=rest(budget.tokens, spent.tokens),
            cost_usd=None if cost is None else round(max(cost - spent.cost_usd, 0.0), 6),
            tool_calls=rest(budget.tool_calls, spent.tool_calls),
        )


def _midnight(day: date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


class UsageReport(WireResponse):
    """A tenant's spending in one UTC period (``start`` inclusive, ``end`` exclusive, both
    midnights), its budget of that period (``null``: none) and what is left of it."""

    tenant: str
    period: Literal["day", "month"]
    start: str = Field(description="The period's first instant (RFC 3339, UTC).")
    end: str = Field(description="The instant after the period (RFC 3339, UTC).")
    spent: UsageAmounts
    budget: UsageLimits | None
    remaining: UsageLimits | None

    @classmethod
    def of(cls, usage: TenantUsage) -> UsageReport:
        budget = usage.budget
        return cls(
            tenant=usage.tenant,
            period=usage.period,
            start=_midnight(usage.start),
            end=_midnight(usage.end),
            spent=UsageAmounts.of(usage.spent),
            budget=None if budget is None else UsageLimits.of(budget),
            remaining=None if budget is None else UsageLimits.left(budget, usage.spent),
        )


class SubmissionUsageReport(WireResponse):
    """The session's open submission: what it spent (its children's answers included)
    against its own budget (its extensions included) and what is left of it."""

    submission_id: str
    spent: UsageAmounts
    budget: UsageLimits
    remaining: UsageLimits

    @classmethod
    def of(cls, spend: SubmissionSpend) -> SubmissionUsageReport | None:
        budget = spend.budget
        if budget is None:
            return None
        return cls(
            submission_id=spend.submission_id,
            spent=UsageAmounts.of(spend.spent),
            budget=UsageLimits.of(budget),
            remaining=UsageLimits.left(budget, spend.spent),
        )


class SessionUsageReport(WireResponse):
    """A session's spending, all its submissions together (its children's answers rolled
    up into it), against its session budget in force (``null``: none) and what is left of
    it; and its open submission's against that submission's own budget (``null``: nothing
    unsettled, or no budget)."""

    conversation_id: str = Field(description="The session's conversation (``session=``).")
    agent: str
    instance: str
    session: str
    tenant: str | None
    spent: UsageAmounts
    budget: UsageLimits | None
    remaining: UsageLimits | None
    submission: SubmissionUsageReport | None

    @classmethod
    def of(cls, spend: SessionSpend) -> SessionUsageReport:
        budget = spend.budget
        open_one = spend.submission
        return cls(
            conversation_id=spend.conversation_id,
            agent=spend.key.agent,
            instance=spend.key.instance,
            session=spend.key.session,
            tenant=spend.tenant,
            spent=UsageAmounts.of(spend.spent),
            budget=None if budget is None else UsageLimits.of(budget),
            remaining=None if budget is None else UsageLimits.left(budget, spend.spent),
            submission=None if open_one is None else SubmissionUsageReport.of(open_one),
        )


class UsageAnswer(RootModel[UsageReport | SessionUsageReport]):
    """What ``GET /usage`` answers: a tenant's spending in a period, or with ``session=`` a
    session's (the one form or the other, never both)."""
