"""The runs parked on their budget: ``GET /budgets`` pages them, ``POST /budgets/{id}``
decides one (approve with an extension, or reject).

A budget gate is a gate of kind ``budget`` (docs/budgets.md): the same index, cursors and
resumption as an approval, with an extension of the budget for its decision.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query

from tether.errors import ApprovalNotFound
from tether.http._access import AccessDependency, actor_of, own_gate, shown_name
from tether.http._budget_views import budget_gate_item
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, failures
from tether.http._gate_pages import GatePageDependency
from tether.store import GateKind
from tether.wire import BudgetDecisionBody, BudgetGatesPage, BudgetReceipt

__all__ = ("budgets_router",)


budgets_router = APIRouter(tags=["budgets"])
"""The budget gates page and a decision."""


@budgets_router.get("/budgets", responses=failures(422, 503))
async def budget_gates(
    runtime: RuntimeDependency,
    query: GatePageDependency,
    status: Literal["pending", "decided", "closed", "all"] = Query(
        default="pending",
        description="pending (waits for a decision), decided, closed (settled undecided: "
        "aborted, timed out) or all.",
    ),
) -> BudgetGatesPage:
    """A page of the runs whose budget ran out under the ``park`` policy, oldest first,
    each with what it spent against which limit."""
    page = await query.read(runtime, GateKind.BUDGET, status)
    return BudgetGatesPage(
        budgets=[budget_gate_item(gate) for gate in page.gates], next_cursor=page.next_cursor
    )


@budgets_router.post("/budgets/{gate_id}", responses=failures(*BODY_FAILURES, 404, 409, 503))
async def decide_budget(
    runtime: RuntimeDependency,
    access: AccessDependency,
    gate_id: str,
    payload: BudgetDecisionBody,
) -> BudgetReceipt:
    """Decide a run parked on its budget: ``approve`` adds ``extension`` to its limits
    (journaled: every later attempt counts it) and resumes it; ``reject`` settles it
    ``budget_exhausted`` with its partial answer. The same decision again answers the same
    record; another is a 409 (``approval_conflict``); a gate whose run already settled is
    a 409 (``invalid_approval``)."""
    identity = access.identity
    await own_gate(runtime, access, gate_id, ApprovalNotFound(gate_id))
    by = actor_of(identity)
    record = await runtime.decide_budget(
        gate_id,
        payload.decision,
        extension=payload.extension,
        approver=shown_name(payload, "approver", identity, by),
        reason=payload.reason,
        by=by,
    )
    return BudgetReceipt(gate_id=gate_id, decision=record)
