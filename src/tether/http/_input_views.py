"""What the inputs routes answer: a page of inputs, and the record an answer wrote."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue, SerializerFunctionWrapHandler, model_serializer

from tether.http._responses import (
    TIMESTAMP,
    WireActor,
    WireRecord,
    WireResponse,
    optional,
    time_of,
)
from tether.store import Gate, GateStatus

__all__ = ("AnswerReceipt", "InputItem", "InputStatus", "InputsPage")

InputStatus = Literal["pending", "answered", "closed"]
_INPUT_STATUS: dict[GateStatus, InputStatus] = {
    GateStatus.PENDING: "pending",
    GateStatus.DECIDED: "answered",
    GateStatus.CLOSED: "closed",
}


class InputItem(WireResponse):
    """An input as ``GET /inputs`` lists it: the question (its prompt and the schema its
    answer must fit), where it stands, and once answered the answer, who gave it and when,
    or the time it was closed (its submission settled unanswered). ``responder`` is the name
    the answer is shown under; ``decidedBy`` who gave it, as the server verified them."""

    input_id: str
    conversation_id: str
    seq: int = Field(description="The seq of the input_requested record.")
    agent: str
    instance: str
    session: str
    submission_id: str | None = optional()
    execution_id: str | None = optional()
    call_id: str
    tool: str = Field(description="What asked: ``ask`` (``Turn.ask``), ``interrupt``, a tool.")
    args: dict[str, JsonValue]
    prompt: str
    answer_schema: dict[str, JsonValue] | None = optional(
        alias="schema", description="The JSON Schema the answer must fit; absent: any value."
    )
    requested_at: str | None = optional(**TIMESTAMP)
    status: InputStatus
    answer: JsonValue = Field(
        default=None,
        description="The value given: present once answered (it may be ``null``), absent before.",
    )
    responder: str | None = optional(description="Who answered, as the answer names them.")
    answered_at: str | None = optional(**TIMESTAMP)
    closed_at: str | None = optional(**TIMESTAMP)
    decided_by: WireActor | None = optional(
        description="Who answered, as the server verified them (their subject and tenant, and "
        "the name shown): absent when no one authenticated did."
    )
    metadata: dict[str, JsonValue] | None = optional(
        description="What the framework attached to the request (pydantic-ai's "
        "``ApprovalRequired``/``CallDeferred`` metadata); absent when nothing was."
    )

    @model_serializer(mode="wrap")
    def _answer_once_answered(self, write: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A null answer is an answer: ``answer`` is kept by the status, not by its value.
        body: dict[str, Any] = write(self)
        if self.status != "answered":
            body.pop("answer", None)
        return body

    @classmethod
    def of(cls, gate: Gate) -> InputItem:
        status = _INPUT_STATUS[gate.status]
        schema = gate.answer_schema
        return cls(
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


class InputsPage(WireResponse):
    inputs: list[InputItem]
    next_cursor: str | None = Field(
        description="The ``cursor`` of the next page; null on the last page."
    )


class AnswerReceipt(WireResponse):
    input_id: str
    answer: WireRecord = Field(description="The input_answered record.")
