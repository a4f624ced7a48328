"""What the budget gates routes answer: a page of runs parked on their budget, and the
record a decision wrote."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue

from tether.http._responses import (
    TIMESTAMP,
    WireActor,
    WireRecord,
    WireResponse,
    optional,
    time_of,
)
from tether.store import Gate, GateStatus

__all__ = ("BudgetGateItem", "BudgetGatesPage", "BudgetReceipt", "BudgetStatus")

BudgetStatus = Literal["pending", "decided", "closed"]
_STATUS: dict[GateStatus, BudgetStatus] = {
    GateStatus.PENDING: "pending",
    GateStatus.DECIDED: "decided",
    GateStatus.CLOSED: "closed",
}


class BudgetGateItem(WireResponse):
    """A run parked on its budget, as ``GET /budgets`` lists it: the limit it used up
    (``limit``, ``used`` of ``max``), what it had spent on every limit (``spent``) and the
    budget in force (``budget``); once decided, the decision, the extension an approval
    granted, who decided and when; or when it closed (its submission settled undecided)."""

    gate_id: str
    conversation_id: str
    seq: int = Field(description="The seq of the budget_requested record.")
    agent: str
    instance: str
    session: str
    submission_id: str | None = optional()
    limit: str = Field(description="modelCalls, tokens, costUsd, toolCalls or wallTime.")
    used: float
    max: float
    spent: dict[str, JsonValue] = Field(
        description="What the submission had spent, by limit (costUsd null when unknown, "
        "wallTime in seconds)."
    )
    budget: dict[str, JsonValue] = Field(description="The budget in force when it ran out.")
    scope: Literal["submission", "session", "tenant"] = Field(
        description="Whose budget ran out: the submission's own, its session's (every "
        "submission of the session together), or its tenant's of a day or month (every run "
        "of the tenant together)."
    )
    requested_at: str | None = optional(**TIMESTAMP)
    status: BudgetStatus
    decision: Literal["approve", "reject"] | None = optional()
    extension: dict[str, JsonValue] | None = optional(
        description="What an approval added to each limit."
    )
    reason: str | None = optional()
    approver: str | None = optional(description="Who decided, as the decision names them.")
    decided_at: str | None = optional(**TIMESTAMP)
    closed_at: str | None = optional(**TIMESTAMP)
    decided_by: WireActor | None = optional(
        description="Who decided, as the server verified them: absent when no one "
        "authenticated did."
    )

    @classmethod
    def of(cls, gate: Gate) -> BudgetGateItem:
        args: dict[str, Any] = dict(gate.args)
        decision = gate.decision if gate.decision in ("approve", "reject") else None
        return cls(
            gate_id=gate.approval_id,
            conversation_id=gate.conversation_id,
            seq=gate.seq,
            agent=gate.key.agent,
            instance=gate.key.instance,
            session=gate.key.session,
            submission_id=gate.submission_id,
            limit=str(args.get("limit", "")),
            used=float(args.get("used", 0)),
            max=float(args.get("max", 0)),
            spent=dict(args.get("spent", {})),
            budget=dict(args.get("budget", {})),
            scope=args["scope"] if args.get("scope") in ("session", "tenant") else "submission",
            requested_at=time_of(gate.requested_at),
            status=_STATUS[gate.status],
            decision=decision,
            extension=None if gate.edited_args is None else dict(gate.edited_args),
            reason=gate.reason,
            approver=gate.approver,
            decided_at=time_of(gate.decided_at),
            closed_at=time_of(gate.closed_at),
            decided_by=gate.decided_by,
        )


class BudgetGatesPage(WireResponse):
    budgets: list[BudgetGateItem]
    next_cursor: str | None = Field(
        description="The ``cursor`` of the next page; null on the last page."
    )


class BudgetReceipt(WireResponse):
    gate_id: str
    decision: WireRecord = Field(description="The budget_decided record.")
