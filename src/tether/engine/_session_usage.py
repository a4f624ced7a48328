"""A session's spending against its session budget, and its open submission's against its
own: counted from the session's journal exactly as the budgets count it before each call
(``BudgetMeter``: children rolled up into their parent, extensions a person approved
included; ``Runtime.session_usage``, ``GET /usage?session=``, docs/budgets.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tether.engine._agents import AgentDefinition
from tether.engine._budget import Budget, BudgetMeter, effective_budget
from tether.engine._context import EngineContext
from tether.engine._inbound import Inbound
from tether.store import Conversation, SessionKey, Submission, UsageSpent

__all__ = ("SessionSpend", "SubmissionSpend", "session_spend")

_PAGE: Final = 1000
"""Records read per step of the log."""


@dataclass(frozen=True, slots=True)
class SubmissionSpend:
    """What one unsettled submission of the session has spent (its children's answers
    included) and the budget it runs under, its extensions included (``None``: none)."""

    submission_id: str
    spent: UsageSpent
    budget: Budget | None


@dataclass(frozen=True, slots=True)
class SessionSpend:
    """What a session has spent, all its submissions together (its children's answers and a
    truncated head's totals included), against its session budget in force (``None``: it
    has none), and its open submission's spending against that submission's own budget
    (``None`` when nothing of it is unsettled, or the open one has no budget).

    Example::

        spend = await runtime.session_usage(conversation_id)
        print(spend.spent.model_calls, spend.budget and spend.budget.model_calls)
    """

    conversation_id: str
    key: SessionKey
    tenant: str | None
    spent: UsageSpent
    budget: Budget | None
    submission: SubmissionSpend | None = None


def _spent(meter: BudgetMeter) -> UsageSpent:
    return UsageSpent(
        model_calls=meter.model_calls,
        tokens=meter.tokens,
        cost_usd=meter.cost_usd,
        tool_calls=meter.tool_calls,
    )


def _submission_budget(
    submission: Submission, definition: AgentDefinition | None, fallback: Budget | None
) -> Budget | None:
    """The budget an attempt of ``submission`` enforces: its dispatch's, its agent's, the
    application's, limit by limit (as ``effective_budget`` makes it)."""
    inbound = Inbound.model_validate(submission.input)
    return effective_budget(
        inbound.budget, None if definition is None else definition.budget, fallback
    )


async def session_spend(context: EngineContext, conversation: Conversation) -> SessionSpend:
    """What ``conversation``'s session spent, read from its whole log (see
    :class:`SessionSpend`)."""
    store = context.store
    key = conversation.key
    unsettled = await store.list_submissions(conversation_id=conversation.id, unsettled=True)
    head = unsettled[0] if unsettled else None
    # The budgets an attempt of the open submission enforces: its version's definition's.
    version = context.versions.for_run(key.agent, None if head is None else head.version)
    definition = None if version is None else version.definition
    config = context.config
    session_budget = effective_budget(
        None if definition is None else definition.session_budget, config.session_budget
    )
    now = context.clock.now
    session_meter = BudgetMeter(session_budget or Budget(), now, scope="session")
    budget = None if head is None else _submission_budget(head, definition, config.budget)
    meter = None if budget is None else BudgetMeter(budget, now)
    mine = "" if head is None else head.id
    after = 0
    while True:
        page = await store.read(conversation.id, after_seq=after, limit=_PAGE)
        session_meter.count_records(page, mine)
        if meter is not None:
            meter.count_records(page, mine)
        if len(page) < _PAGE:
            break
        after = page[-1].seq
    return SessionSpend(
        conversation_id=conversation.id,
        key=key,
        tenant=conversation.tenant,
        spent=_spent(session_meter),
        budget=None if session_budget is None else session_meter.budget,
        submission=None
        if meter is None or head is None
        else SubmissionSpend(head.id, _spent(meter), meter.budget),
    )
