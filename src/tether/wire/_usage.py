"""What ``GET /usage`` answers: a tenant's spending in a UTC day or month against the budget
it spends from then, or a session's against its session budget (docs/budgets.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    RootModel,
)

from tether.wire._base import WireResponse

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


class UsageLimits(WireResponse):
    """A limit (or what is left of it) for each amount; ``null``: unlimited."""

    model_calls: int | None
    tokens: int | None
    cost_usd: float | None
    tool_calls: int | None


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


class SubmissionUsageReport(WireResponse):
    """The session's open submission: what it spent (its children's answers included)
    against its own budget (its extensions included) and what is left of it."""

    submission_id: str
    spent: UsageAmounts
    budget: UsageLimits
    remaining: UsageLimits


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


class UsageAnswer(RootModel[UsageReport | SessionUsageReport]):
    """What ``GET /usage`` answers: a tenant's spending in a period, or with ``session=`` a
    session's (the one form or the other, never both)."""
