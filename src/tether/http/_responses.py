"""Answering: :func:`respond` writes a wire model (:mod:`tether.wire`, which
``/openapi.json`` is generated from) as a route's answer, and the functions here build the
answers most routes give from the runtime's values (a dispatch's, a gate's); the others
are built beside their routes (``_submission_views``, ``_session_views``...).

On the wire every name is camelCase, and an optional field that holds nothing is omitted,
never ``null`` (:func:`tether.wire.optional`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from urllib.parse import quote

from fastapi.responses import Response
from pydantic import JsonValue

from tether.engine import Receipt
from tether.records import ApprovalDecided
from tether.store import Gate, SessionKey, SubmissionStatus
from tether.wire import (
    ApprovalItem,
    DispatchAccepted,
    DispatchSettled,
    SubmissionReceipt,
    WireResponse,
)

__all__ = (
    "approval_item",
    "dispatch_accepted",
    "dispatch_settled",
    "respond",
    "stream_url",
    "submission_receipt",
    "time_of",
)


def stream_url(key: SessionKey) -> str:
    """Where the session's stream is served: ``/agents/{agent}/{instance}?session=...``
    (what ``streamUrl`` says, and the canonical stream's task events link to)."""
    path = f"/agents/{quote(key.agent, safe='')}/{quote(key.instance, safe='')}"
    return f"{path}?session={quote(key.session, safe='')}"


def time_of(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def respond(body: WireResponse, status: int = 200, **headers: str) -> Response:
    """An answer a route writes itself, its model documented by the route's
    ``response_model`` or ``responses``: when the route answers two shapes (FastAPI would
    check the body against one), or when the body writes faster than the model dumps."""
    return Response(
        body.to_json(), status_code=status, media_type="application/json", headers=headers
    )


# Wire models omit their absent optionals (``to_json_object``), which a response's own dump
# would not do for them.


def submission_receipt(receipt: Receipt) -> SubmissionReceipt:
    return SubmissionReceipt(
        submission_id=receipt.submission_id, conversation_id=receipt.conversation_id
    )


def dispatch_accepted(
    receipt: Receipt, agent: str, instance: str, status: SubmissionStatus | None = None
) -> DispatchAccepted:
    return DispatchAccepted(
        submission_id=receipt.submission_id,
        conversation_id=receipt.conversation_id,
        session=receipt.session,
        status=status,
        stream_url=stream_url(SessionKey(agent, instance, receipt.session)),
    )


def dispatch_settled(receipt: Receipt, settled: Mapping[str, JsonValue]) -> DispatchSettled:
    return DispatchSettled.model_validate(
        {
            **settled,
            "submissionId": receipt.submission_id,
            "conversationId": receipt.conversation_id,
            "session": receipt.session,
        }
    )


def approval_item(gate: Gate) -> ApprovalItem:
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
    return ApprovalItem(
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
