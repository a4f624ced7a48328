"""What the HTTP API answers: a response model for every body a route returns (a
submission's, with its tree, in ``_submission_views``). ``/openapi.json`` is generated from
them (the error envelope's is in ``_errors``).

On the wire every name is camelCase, and an optional field that holds nothing is omitted
(:func:`optional`), never ``null``; a field that may say ``null`` says so in its type and
has no default (``nextCursor``). Wire objects of the log's own (a record, a message, a
decision) are served as they are: a response holds them, and their own serializer writes
them (:data:`WireRecord`, :data:`WireMessage`).

Response schemas are these models' validation schemas (``create_app`` sets
``separate_input_output_schemas=False``): what a model holds, not how a serializer
annotation on one of its fields would be typed, which is what the wire shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote

import orjson
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, JsonValue, PlainSerializer, PlainValidator
from pydantic.alias_generators import to_camel

from tether import records
from tether.engine import Receipt
from tether.http._requests import title
from tether.messages import Message
from tether.records import Actor, ApprovalDecided, SettlementStatus
from tether.store import Gate, GateStatus, SessionKey, SubmissionStatus

__all__ = (
    "TIMESTAMP",
    "Aborted",
    "Alive",
    "ApprovalItem",
    "ApprovalsPage",
    "DecisionReceipt",
    "DependencyItem",
    "DispatchAccepted",
    "DispatchSettled",
    "Forked",
    "MessagesPage",
    "Ready",
    "RecordEnvelope",
    "RecordsPage",
    "Settlement",
    "SubmissionReceipt",
    "Verified",
    "WireActor",
    "WireMessage",
    "WireRecord",
    "WireResponse",
    "optional",
    "respond",
    "stream_url",
    "time_of",
)


def _absent(value: object) -> bool:
    return value is None


def optional(**schema: Any) -> Any:
    """An optional field, omitted from the wire when it holds None."""
    return Field(default=None, exclude_if=_absent, **schema)


def stream_url(key: SessionKey) -> str:
    """Where the session's stream is served: ``/agents/{agent}/{instance}?session=...``
    (what ``streamUrl`` says, and the canonical stream's task events link to)."""
    path = f"/agents/{quote(key.agent, safe='')}/{quote(key.instance, safe='')}"
    return f"{path}?session={quote(key.session, safe='')}"


def time_of(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


TIMESTAMP: dict[str, Any] = {"json_schema_extra": {"format": "date-time"}}
"""Times are written as Python's ``isoformat`` writes them (``+00:00``), so they are held as
the strings sent; the schema says what they are."""


class WireResponse(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        field_title_generator=title,
    )

    def to_json(self) -> bytes:
        """The body on the wire: what FastAPI writes for a route that returns the model."""
        return self.__pydantic_serializer__.to_json(self)


def respond(body: WireResponse, status: int = 200, **headers: str) -> Response:
    """An answer a route writes itself, its model documented by the route's
    ``response_model`` or ``responses``: when the route answers two shapes (FastAPI would
    check the body against one), or when the body writes faster than the model dumps."""
    return Response(
        body.to_json(), status_code=status, media_type="application/json", headers=headers
    )


def _a_record(value: object) -> records.Record:
    if isinstance(value, records.Record):
        return value
    if isinstance(value, Mapping):  # read back from the wire (tether.client): decoded once
        return records.decode_record(value)
    raise ValueError(f"a Record, not {type(value).__name__}")


class RecordEnvelope(WireResponse):
    """A record of the log as it is stored and sent (SSE ``data`` too): its envelope, its
    kind's payload, and its place in the hash chain."""

    seq: int
    id: str
    kind: str
    conversation_id: str
    session: str
    submission_id: str | None = optional()
    attempt_id: str | None = optional()
    execution_id: str | None = optional()
    turn: int | None = optional()
    time: str = Field(**TIMESTAMP)
    payload: dict[str, JsonValue]
    prev_hash: str
    hash: str


WireRecord = Annotated[
    records.Record,
    # A record is checked once, when it is written; a response holds it as it is. A client
    # reading the response decodes it from its wire form.
    PlainValidator(_a_record, json_schema_input_type=RecordEnvelope),
    PlainSerializer(records.Record.to_wire),
]
"""A stored record in a response: documented as :class:`RecordEnvelope`, sent as stored."""

# Wire models omit their absent optionals (``to_json_object``), which a response's own dump
# would not do for them.
WireMessage = Annotated[Message, PlainSerializer(Message.to_json_object)]
"""A message in a response, in its wire form."""
WireDecision = Annotated[ApprovalDecided, PlainSerializer(ApprovalDecided.to_json_object)]
WireActor = Annotated[Actor, PlainSerializer(Actor.to_json_object)]
"""Who did something, as the server verified them: ``{subject, tenant?, display?}``."""
_DECIDED_BY: dict[str, Any] = {
    "description": "Who decided, as the server verified them (their subject and tenant, and the "
    "name shown): absent when no one authenticated did (a server without auth, a library call)."
}


class SubmissionReceipt(WireResponse):
    """What was admitted (``steer``, ``followup``, ``compact``)."""

    submission_id: str
    conversation_id: str

    @classmethod
    def of(cls, receipt: Receipt) -> SubmissionReceipt:
        return cls(submission_id=receipt.submission_id, conversation_id=receipt.conversation_id)


class DispatchAccepted(WireResponse):
    """An admitted dispatch (202, ``Location: /submissions/<id>``): follow it on
    ``streamUrl``, or poll the submission."""

    submission_id: str
    conversation_id: str
    session: str
    status: SubmissionStatus | None = optional(
        description="Only when ``?wait`` ran out first: where the submission stands "
        "(``waiting``: parked for an approval)."
    )
    stream_url: str

    @classmethod
    def of(
        cls, receipt: Receipt, agent: str, instance: str, status: SubmissionStatus | None = None
    ) -> DispatchAccepted:
        return cls(
            submission_id=receipt.submission_id,
            conversation_id=receipt.conversation_id,
            session=receipt.session,
            status=status,
            stream_url=stream_url(SessionKey(agent, instance, receipt.session)),
        )


class Settlement(WireResponse):
    """How a submission ended: its ``result`` when it succeeded, else its ``error`` and
    ``errorCode`` (and for a model provider's failure, ``errorDetails``: the HTTP ``status``
    it answered and the ``tries``)."""

    status: SettlementStatus
    result: JsonValue = optional()
    error: str | None = optional()
    error_code: str | None = optional()
    error_details: dict[str, JsonValue] | None = optional()
    aborted_by: WireActor | None = optional(
        description="Who aborted it, as the server verified them (their subject, tenant and "
        "the name shown): absent when no one authenticated did."
    )


class DispatchSettled(Settlement):
    """A dispatch waited for (``?wait=true``) and settled in time: its settlement (200,
    whatever the run's outcome)."""

    submission_id: str
    conversation_id: str
    session: str

    @classmethod
    def of(cls, receipt: Receipt, settled: Mapping[str, JsonValue]) -> DispatchSettled:
        return cls.model_validate(
            {
                **settled,
                "submissionId": receipt.submission_id,
                "conversationId": receipt.conversation_id,
                "session": receipt.session,
            }
        )


class Aborted(WireResponse):
    aborted: list[str] = Field(description="The submissions the abort cancelled.")


class ApprovalItem(WireResponse):
    """A gate as ``GET /approvals`` lists it: the request, where it stands, and once decided
    the decision as its record holds it (with its time and, when known, who made it as the
    server verified them: ``decidedBy``), or the time it was closed."""

    approval_id: str
    agent: str
    instance: str
    session: str
    submission_id: str | None = optional()
    conversation_id: str
    execution_id: str | None = optional()
    call_id: str
    seq: int = Field(description="The seq of the approval_requested record.")
    tool: str
    args: dict[str, JsonValue]
    args_digest: str
    status: GateStatus
    requested_at: str | None = optional(**TIMESTAMP)
    decided_at: str | None = optional(**TIMESTAMP)
    closed_at: str | None = optional(**TIMESTAMP)
    decision: WireDecision | None = optional()
    decided_by: WireActor | None = optional(**_DECIDED_BY)
    metadata: dict[str, JsonValue] | None = optional(
        description="What the framework attached to the request (pydantic-ai's "
        "``ApprovalRequired``/``CallDeferred`` metadata); absent when nothing was."
    )

    @classmethod
    def of(cls, gate: Gate) -> ApprovalItem:
        decision = None
        if gate.decision is not None and gate.approver is not None:
            decision = ApprovalDecided(
                approval_id=gate.approval_id,
                call_id=gate.call_id,
                decision=gate.decision,
                args=None if gate.edited_args is None else dict(gate.edited_args),
                reason=gate.reason,
                approver=gate.approver,
                by=gate.decided_by,
            )
        return cls(
            approval_id=gate.approval_id,
            agent=gate.key.agent,
            instance=gate.key.instance,
            session=gate.key.session,
            submission_id=gate.submission_id,
            conversation_id=gate.conversation_id,
            execution_id=gate.execution_id,
            call_id=gate.call_id,
            seq=gate.seq,
            tool=gate.tool,
            args=dict(gate.args),
            args_digest=gate.args_digest,
            status=gate.status,
            requested_at=time_of(gate.requested_at),
            decided_at=time_of(gate.decided_at),
            closed_at=time_of(gate.closed_at),
            decision=decision,
            decided_by=gate.decided_by,
            metadata=None if gate.metadata is None else dict(gate.metadata),
        )


class ApprovalsPage(WireResponse):
    approvals: list[ApprovalItem]
    next_cursor: str | None = Field(
        description="The ``cursor`` of the next page; null on the last page."
    )


class DecisionReceipt(WireResponse):
    approval_id: str
    decision: WireRecord = Field(description="The approval_decided record.")


class RecordsPage(WireResponse):
    conversation_id: str
    records: list[WireRecord]
    next: int = Field(description="The ``after`` of the next page: the last seq sent.")

    def to_json(self) -> bytes:
        """Each record as stored, the bytes the SSE stream sends: not decoded into a dict and
        encoded again (a page of 100 records writes in 40% less time than that)."""
        return orjson.dumps(
            {
                "conversationId": self.conversation_id,
                "records": [orjson.Fragment(record.to_json()) for record in self.records],
                "next": self.next,
            }
        )


class MessagesPage(WireResponse):
    conversation_id: str
    messages: list[WireMessage] = Field(
        description="The history as the model sees it next turn (compactions applied)."
    )


class Forked(WireResponse):
    conversation_id: str
    agent: str
    instance: str
    session: str
    repaired_calls: list[str] = Field(
        description="The tool calls the cut separated from their results, each now given an "
        "``unknown`` result."
    )


class Verified(WireResponse):
    conversation_id: str
    ok: bool
    records: int = Field(description="The seq the hash chain was verified up to (the head).")
    first_seq: int = Field(
        default=1,
        description="Where the chain was verified from: 1, or the seq of the log_truncated "
        "record retention left in place of the records before it.",
    )


class Alive(WireResponse):
    ok: bool


class DependencyItem(WireResponse):
    """One thing the server depends on, and its state."""

    name: str = Field(description="store, liveness (a worker's lock) or otlp (an exporter).")
    state: Literal["up", "down", "unknown"] = Field(
        description="unknown: not tried yet (an exporter before its first export)."
    )
    required: bool = Field(description="Whether the server is ready only while it is up.")
    detail: str | None = optional(description="Why it is not up, in words safe to show.")


class Ready(WireResponse):
    ready: bool
    dependencies: list[DependencyItem] = Field(
        default_factory=list, description="Each dependency, the store first."
    )
