"""What the HTTP API answers: a response model for the bodies most routes return (a
submission's in ``_submissions``, a session's in ``_sessions``, a gate's in ``_gates``).

On the wire every name is camelCase, and an optional field that holds nothing is omitted
(:func:`~tether.wire._base.optional`), never ``null``; a field that may say ``null`` says so
in its type and has no default (``nextCursor``)."""

from __future__ import annotations

from typing import Literal

import orjson
from pydantic import (
    Field,
    JsonValue,
)

from tether._payloads import SettlementStatus
from tether._states import GateStatus, SubmissionStatus
from tether.wire._base import TIMESTAMP, WireResponse, optional
from tether.wire._logged import DECIDED_BY, WireActor, WireDecision, WireMessage, WireRecord

__all__ = (
    "Aborted",
    "Alive",
    "ApprovalItem",
    "ApprovalsPage",
    "DecisionReceipt",
    "DependencyItem",
    "DispatchAccepted",
    "DispatchSettled",
    "Forked",
    "IdentityView",
    "MessagesPage",
    "Ready",
    "RecordsPage",
    "Settlement",
    "SubmissionReceipt",
    "Verified",
)


class SubmissionReceipt(WireResponse):
    """What was admitted (``steer``, ``followup``, ``compact``)."""

    submission_id: str
    conversation_id: str


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
    decided_by: WireActor | None = optional(**DECIDED_BY)
    metadata: dict[str, JsonValue] | None = optional(
        description="What the framework attached to the request (pydantic-ai's "
        "``ApprovalRequired``/``CallDeferred`` metadata); absent when nothing was."
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


class IdentityView(WireResponse):
    """The caller as the server verified them."""

    subject: str
    tenant: str | None = optional(description="Absent for an operator, who sees every tenant.")
    display: str | None = optional()
    scopes: list[str] = Field(description="What the caller may do (``admin``: everything).")
    agents: list[str] | None = optional(description="The agents they may use; absent: all.")
