"""What the inputs routes answer, built from the store's gates: :func:`input_item` (the
models are :mod:`tether.wire`'s)."""

from __future__ import annotations

from tether.http._responses import (
    time_of,
)
from tether.store import Gate, GateStatus
from tether.wire import InputItem, InputStatus

__all__ = ("input_item",)

_INPUT_STATUS: dict[GateStatus, InputStatus] = {
    GateStatus.PENDING: "pending",
    GateStatus.DECIDED: "answered",
    GateStatus.CLOSED: "closed",
}


def input_item(gate: Gate) -> InputItem:
    status = _INPUT_STATUS[gate.status]
    schema = gate.answer_schema
    return InputItem(
        input_id=gate.approval_id,
        conversation_id=gate.conversation_id,
        seq=gate.seq,
        agent=gate.key.agent,
        instance=gate.key.instance,
        session=gate.key.session,
        submission_id=gate.submission_id,
        execution_id=gate.execution_id,
        call_id=gate.call_id,
        tool=gate.tool,
        args=dict(gate.args),
        prompt=gate.prompt or "",
        answer_schema=None if schema is None else dict(schema),
        requested_at=time_of(gate.requested_at),
        status=status,
        answer=gate.answer if status == "answered" else None,
        responder=gate.approver,
        answered_at=time_of(gate.decided_at),
        closed_at=time_of(gate.closed_at),
        decided_by=gate.decided_by,
        metadata=None if gate.metadata is None else dict(gate.metadata),
    )
