"""Deciding a durable adapter's parked tool call, as the adapters' approval tests all do."""

from typing import Any

from pydantic import JsonValue

from tether.engine import Receipt, Runtime
from tether.journal import Decision, Journal
from tether.records import ApprovalRequested
from tether.store import Store, SubmissionStatus

from ..engine.test_control import wait_for_status
from ..engine.test_runtime import settle

__all__ = ("decide_parked",)


async def decide_parked(
    runtime: Runtime,
    store: Store,
    receipt: Receipt,
    decision: Decision,
    args: dict[str, JsonValue] | None,
) -> tuple[dict[str, Any], JsonValue]:
    """Wait for the run to park on its gate, decide it as ``ann`` (``reject`` with reason
    ``no``), and return the gated call's arguments and the settled result."""
    await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
    state = await (await Journal.open(store, receipt.conversation_id, fence=0)).inspect_approval()
    assert state is not None and state.approval_id is not None and state.request is not None
    # The request keeps the schema the framework offered the model, for edits to fit.
    request = state.request.payload
    assert isinstance(request, ApprovalRequested) and request.parameters is not None
    assert request.parameters.get("type") == "object"
    reason = "no" if decision == "reject" else None
    await runtime.approve(state.approval_id, decision, approver="ann", reason=reason, args=args)
    return dict(state.tool_call.args), (await settle(runtime, receipt.submission_id))["result"]
