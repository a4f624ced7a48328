"""What ``GET /usage`` answers, built from the runtime's values: a tenant's spending in a UTC
day or month against the budget it spends from then (:func:`usage_report`), or a session's
against its session budget (:func:`session_usage_report`). The models are
:mod:`tether.wire`'s (docs/budgets.md)."""

from __future__ import annotations

from datetime import date

from tether.engine import Budget, SessionSpend, SubmissionSpend, TenantUsage
from tether.store import UsageSpent
from tether.wire import (
    SessionUsageReport,
    SubmissionUsageReport,
    UsageAmounts,
    UsageLimits,
    UsageReport,
)

__all__ = (
    "limits_left",
    "session_usage_report",
    "submission_usage_report",
    "usage_amounts",
    "usage_limits",
    "usage_report",
)


def _midnight(day: date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


def usage_amounts(spent: UsageSpent) -> UsageAmounts:
    return UsageAmounts(
        model_calls=spent.model_calls,
        tokens=spent.tokens,
        cost_usd=round(spent.cost_usd, 6),
        tool_calls=spent.tool_calls,
    )


def usage_limits(budget: Budget) -> UsageLimits:
    return UsageLimits(
        model_calls=budget.model_calls,
        tokens=budget.tokens,
        cost_usd=budget.cost_usd,
        tool_calls=budget.tool_calls,
    )


def limits_left(budget: Budget, spent: UsageSpent) -> UsageLimits:
    def rest(limit: int | None, used: int) -> int | None:
        return None if limit is None else max(limit - used, 0)

    cost = budget.cost_usd
    return UsageLimits(
        model_calls=rest(budget.model_calls, spent.model_calls),
        tokens=rest(budget.tokens, spent.tokens),
        cost_usd=None if cost is None else round(max(cost - spent.cost_usd, 0.0), 6),
        tool_calls=rest(budget.tool_calls, spent.tool_calls),
    )


def usage_report(usage: TenantUsage) -> UsageReport:
    budget = usage.budget
    return UsageReport(
        tenant=usage.tenant,
        period=usage.period,
        start=_midnight(usage.start),
        end=_midnight(usage.end),
        spent=usage_amounts(usage.spent),
        budget=None if budget is None else usage_limits(budget),
        remaining=None if budget is None else limits_left(budget, usage.spent),
    )


def submission_usage_report(spend: SubmissionSpend) -> SubmissionUsageReport | None:
    budget = spend.budget
    if budget is None:
        return None
    return SubmissionUsageReport(
        submission_id=spend.submission_id,
        spent=usage_amounts(spend.spent),
        budget=usage_limits(budget),
        remaining=limits_left(budget, spend.spent),
    )


def session_usage_report(spend: SessionSpend) -> SessionUsageReport:
    budget = spend.budget
    open_one = spend.submission
    return SessionUsageReport(
        conversation_id=spend.conversation_id,
        agent=spend.key.agent,
        instance=spend.key.instance,
        session=spend.key.session,
        tenant=spend.tenant,
        spent=usage_amounts(spend.spent),
        budget=None if budget is None else usage_limits(budget),
        remaining=None if budget is None else limits_left(budget, spend.spent),
        submission=None if open_one is None else submission_usage_report(open_one),
    )
