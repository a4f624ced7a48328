"""Gates as the log records them: finding, inspecting and deciding one.

A gate is a call that waits for a person: an approval (``Mediation.APPROVAL``: may the tool
run?) or an input (``Mediation.INPUT``: what is the call's result?). Both park the
execution the same way; ``ApprovalState.kind`` tells them apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from tether._canonical import canonical_json
from tether._states import Decision
from tether.errors import (
    ApprovalConflict,
    ApprovalNotFound,
    InputClosed,
    InvalidApproval,
    InvalidEditArgs,
)
from tether.journal._executions import Execution
from tether.journal._schemas import schema_error
from tether.messages import Mediation
from tether.records import (
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    InputAnswered,
    InputRequested,
    Record,
    ToolCalled,
    ToolOutcome,
)

__all__ = (
    "GATED",
    "ApprovalState",
    "Decision",
    "check_decidable",
    "check_edit",
    "find_decision",
    "gate_of",
    "latest_gate",
    "open_gate",
)


GATED = frozenset({Mediation.APPROVAL, Mediation.INPUT})
"""The mediations whose calls wait for a person."""
_REQUESTS = {ApprovalRequested.KIND: "request", InputRequested.KIND: "request"}
_ANSWERS = {ApprovalDecided.KIND: "decision", InputAnswered.KIND: "decision"}
_GATE_RECORDS = (ApprovalRequested, ApprovalDecided, InputRequested, InputAnswered, ToolOutcome)


@dataclass(frozen=True, slots=True)
class ApprovalState:
    """One gated call and what the log holds of it (the original records): an approval's
    request and decision, or an input's request and answer."""

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
    def kind(self) -> Literal["approval", "input"]:
        return "input" if self.tool_call.mediation is Mediation.INPUT else "approval"

    @property
    def approval_id(self) -> str | None:
        """The gate's id: the approval id, or the input id of an input."""
        if self.request is None:
            return None
        payload = self.request.payload
        if isinstance(payload, InputRequested):
            return payload.input_id
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
        if isinstance(
            other,
            ApprovalRequested | ApprovalDecided | InputRequested | InputAnswered | ToolOutcome,
        ) and (other.call_id == payload.call_id):
            role = _REQUESTS.get(record.kind) or _ANSWERS.get(record.kind) or "receipt"
            found.setdefault(role, record)
    return ApprovalState(
        execution_id=execution.id,
        call=call,
        request=found.get("request"),
        decision=found.get("decision"),
        receipt=found.get("receipt"),
        inherited=call.seq <= fork_seq,
        completed=execution.completed,
    )


def latest_gate(execution: Execution, fork_seq: int) -> ApprovalState | None:
    """The state of the execution's last gated call, if it made one."""
    calls = [
        record
        for record in execution.effects
        if isinstance(record.payload, ToolCalled) and record.payload.mediation in GATED
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
    by: Actor | None = None,
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
        raise InvalidEditArgs("an edit decision needs the edited args")
    if decision != "edit" and args is not None:
        raise InvalidEditArgs("only an edit decision carries args")
    for record in records:
        payload = record.payload if record.kind == ApprovalDecided.KIND else None
        if isinstance(payload, ApprovalDecided) and payload.approval_id == approval_id:
            same = (
                payload.decision == decision
                and payload.approver == approver
                and payload.by == by
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


def check_decidable(
    request: Record,
    latest: Execution | None,
    fork_seq: int,
    approval_id: str,
    *,
    refuse: type[InvalidApproval | InputClosed] = InvalidApproval,
) -> None:
    """``refuse`` (``InvalidApproval``) unless the request is the open gate of the log's
    latest execution (not a fork parent's, not superseded by a later gate or execution, not
    yet answered)."""
    what = "input" if refuse is InputClosed else "approval"
    if request.seq <= fork_seq:
        raise refuse(f"{what} {approval_id} belongs to the fork parent")
    gate = latest_gate(latest, 0) if latest is not None else None
    if (
        latest is None
        or latest.id != request.execution_id
        or latest.completed
        or gate is None
        or (gate.request is None or gate.request.seq != request.seq or gate.receipt is not None)
    ):
        raise refuse(f"{what} {approval_id} was superseded or already completed")


def check_edit(requested: ApprovalRequested, args: dict[str, JsonValue]) -> None:
    """Edited arguments must fit the parameters schema the model was offered for the tool,
    which the request recorded: the decision is checked against what the log holds, not
    against whatever tools the agent defines by the time someone decides. A request that
    recorded no schema (its harness offered none) takes any JSON object."""
    schema = requested.parameters
    found = None if schema is None else schema_error(schema, args, f"tool {requested.tool}")
    if found is not None:
        message, path = found
        raise InvalidEditArgs(
            f"the edited args do not fit the parameters of {requested.tool}: {message}",
            field=f"args.{path}" if path else "args",
        )


def open_gate(executions: Sequence[Execution], fork_seq: int) -> ApprovalState | None:
    """The gate a submission's executions (in start order) leave unanswered, if any: the
    last gated call of its last execution, while that execution is pending and the call has
    no outcome (``status`` tells a pending gate from a decided one).

    Example::

        view = await journal.refresh()
        gate = open_gate(view.executions.by_submission.get(submission_id, []), view.fork_seq)
        if gate is not None and gate.status == "pending":
            print("waiting for", gate.approval_id)
    """
    if not executions or executions[-1].completed:
        return None
    gate = latest_gate(executions[-1], fork_seq)
    if gate is None or gate.receipt is not None or gate.inherited:
        return None
    return gate
