"""What the budget gates routes answer, built from the store's gates:
:func:`budget_gate_item` (the models are :mod:`tether.wire`'s)."""

from __future__ import annotations

from typing import Any

from tether.http._responses import (
    time_of,
)
from tether.store import Gate, GateStatus
from tether.wire import BudgetGateItem, BudgetStatus

__all__ = ("budget_gate_item",)

_STATUS: dict[GateStatus, BudgetStatus] = {
    GateStatus.PENDING: "pending",
    GateStatus.DECIDED: "decided",
    GateStatus.CLOSED: "closed",
}


def budget_gate_item(gate: Gate) -> BudgetGateItem:
    args: dict[str, Any] = dict(gate.args)
    decision = gate.decision if gate.decision in ("approve", "reject") else None
    return BudgetGateItem(
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
