"""Approval gates as the log records them: finding, inspecting and deciding one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from tether._canonical import canonical_json
from tether.errors import ApprovalConflict, ApprovalNotFound, InvalidApproval
from tether.journal._executions import Execution
from tether.messages import Mediation
from tether.records import ApprovalDecided, ApprovalRequested, Record, ToolCalled, ToolOutcome

__all__ = ("ApprovalState", "Decision", "find_decision", "gate_of", "latest_gate")

Decision = Literal["approve", "reject", "edit"]


@dataclass(frozen=True, slots=True)
class ApprovalState:
    """One gated tool call and what the log holds of it (the original records)."""

    execution_id: str
    call: Record
    request: Record | None
    decision: Record | None
    receipt: Record | None
    inherited: bool
    """The gate was copied from a fork parent: the child may not decide or resume it."""
    completed: bool
    """Its execution has ended."""

    @property
    def approval_id(self) -> str | None:
        if self.request is None:
            return None
        payload = self.request.payload
        assert isinstance(payload, ApprovalRequested)
        return payload.approval_id

    @property
    def tool_call(self) -> ToolCalled:
        payload = self.call.payload
        assert isinstance(payload, ToolCalled)
        return payload

    @property
    def status(self) -> Literal["pending", "decided", "completed"]:
        if self.receipt is not None:
            return "completed"
        return "pending" if self.decision is None else "decided"


def gate_of(execution: Execution, call: Record, fork_seq: int) -> ApprovalState:
    payload = call.payload
    assert isinstance(payload, ToolCalled)
    found: dict[str, Record] = {}
    for record in execution.effects:
        other = record.payload
        if isinstance(other, ApprovalRequested | ApprovalDecided | ToolOutcome) and (
            other.call_id == payload.call_id
        ):
            found.setdefault(record.kind, record)
    return ApprovalState(
        execution_id=execution.id,
        call=call,
        request=found.get(ApprovalRequested.KIND),
        decision=found.get(ApprovalDecided.KIND),
        receipt=found.get(ToolOutcome.KIND),
        inherited=call.seq <= fork_seq,
        completed=execution.completed,
    )


def latest_gate(execution: Execution, fork_seq: int) -> ApprovalState | None:
    """The state of the execution's last gated tool call, if it made one."""
    calls = [
        record
        for record in execution.effects
        if isinstance(record.payload, ToolCalled) and record.payload.mediation is Mediation.APPROVAL
    ]
    return gate_of(execution, calls[-1], fork_seq) if calls else None


def find_decision(
    records: Sequence[Record],
    approval_id: str,
    *,
    decision: Decision,
    approver: str,
    reason: str | None,
    args: dict[str, JsonValue] | None,
) -> tuple[Record, Record | None]:
    """The request an approval id names, and its decision if an identical one exists.

    Raises ``ApprovalNotFound`` for an unknown id and ``ApprovalConflict`` if the request
    was already decided differently (decisions are final; repeating one is idempotent).
    """
    request = next(
        (
            record
            for record in records
            if isinstance(record.payload, ApprovalRequested)
            and record.payload.approval_id == approval_id
        ),
        None,
    )
    if request is None:
        raise ApprovalNotFound(approval_id)
    if decision == "edit" and args is None:
        raise InvalidApproval("an edit decision needs the edited args")
    if decision != "edit" and args is not None:
        raise InvalidApproval("only an edit decision carries args")
    for record in records:
        payload = record.payload if record.kind == ApprovalDecided.KIND else None
        if isinstance(payload, ApprovalDecided) and payload.approval_id == approval_id:
            same = (
                payload.decision == decision
                and payload.approver == approver
                and payload.reason == reason
                and canonical_json(payload.args) == canonical_json(args)
            )
            if not same:
                raise ApprovalConflict(
                    f"approval {approval_id} was already decided ({payload.decision} by "
                    f"{payload.approver}); decisions are final"
                )
            return request, record
    return request, None
