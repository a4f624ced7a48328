"""The approval gates: ``GET /approvals`` pages them, ``POST /approvals/{id}`` decides one."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query

from tether.errors import ApprovalNotFound
from tether.http._access import AccessDependency, actor_of, own_gate, shown_name
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, failures
from tether.http._gate_pages import GatePageDependency
from tether.http._responses import approval_item
from tether.store import GateKind
from tether.wire import ApprovalsPage, DecisionBody, DecisionReceipt

__all__ = ("approvals_router",)


approvals_router = APIRouter(tags=["approvals"])
"""The approvals page and a decision."""


@approvals_router.get("/approvals", responses=failures(422, 503))
async def approvals(
    runtime: RuntimeDependency,
    query: GatePageDependency,
    status: Literal["pending", "decided", "closed", "all"] = Query(
        default="pending",
        description="pending (waits for a decision), decided (the decisions made, the "
        "audit trail), closed (settled undecided) or all.",
    ),
    tool: str | None = Query(default=None, max_length=200),
) -> ApprovalsPage:
    """A page of approval gates, oldest request first."""
    page = await query.read(runtime, GateKind.APPROVAL, status, tool=tool)
    return ApprovalsPage(
        approvals=[approval_item(gate) for gate in page.gates],
        next_cursor=page.next_cursor,
    )


@approvals_router.post(
    "/approvals/{approval_id}", responses=failures(*BODY_FAILURES, 404, 409, 503)
)
async def decide(
    runtime: RuntimeDependency,
    access: AccessDependency,
    approval_id: str,
    payload: DecisionBody,
) -> DecisionReceipt:
    """Decide a parked tool call: approve, reject, or edit its arguments (checked
    against the tool's schema). The same decision again answers the same record. The
    decision records who made it (the request's identity); ``approver`` is only the name
    it is shown under (the identity's, if not given)."""
    identity = access.identity
    await own_gate(runtime, access, approval_id, ApprovalNotFound(approval_id))
    by = actor_of(identity)
    record = await runtime.approve(
        approval_id,
        payload.decision,
        approver=shown_name(payload, "approver", identity, by),
        reason=payload.reason,
        args=payload.args,
        by=by,
    )
    return DecisionReceipt(approval_id=approval_id, decision=record)
