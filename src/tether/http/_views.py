"""JSON views of submissions and approvals."""

from __future__ import annotations

from typing import Any

from tether.engine import SubmissionInfo
from tether.records import ApprovalDecided
from tether.store import Gate

__all__ = ("approval_item", "submission_view")


def _time(value: object) -> str | None:
    return value.isoformat() if value is not None else None  # type: ignore[attr-defined]


def submission_view(info: SubmissionInfo) -> dict[str, Any]:
    s = info.submission
    view: dict[str, Any] = {
        "submissionId": s.id,
        "dispatchId": s.dispatch_id,
        "agent": s.key.agent,
        "instance": s.key.instance,
        "session": s.key.session,
        "conversationId": s.conversation_id,
        "status": s.status.value,
        "input": s.input,
        "attemptCount": s.attempt_count,
        "attempts": [
            {
                "attemptId": a.id,
                "number": a.number,
                "ownerId": a.owner_id,
                "startedAt": _time(a.started_at),
            }
            for a in info.attempts
        ],
        "lastError": s.last_error,
        "createdAt": _time(s.created_at),
        "settledAt": _time(s.settled_at),
    }
    if s.settlement is not None:
        view["settlement"] = s.settlement
    return {key: value for key, value in view.items() if value is not None}


def approval_item(gate: Gate) -> dict[str, Any]:
    """A gate as ``GET /approvals`` lists it: the request, where it stands, and once decided
    the decision as its record holds it (with its time), or the time it was closed."""
    item: dict[str, Any] = {
        "approvalId": gate.approval_id,
        "agent": gate.key.agent,
        "instance": gate.key.instance,
        "session": gate.key.session,
        "submissionId": gate.submission_id,
        "conversationId": gate.conversation_id,
        "executionId": gate.execution_id,
        "callId": gate.call_id,
        "seq": gate.seq,
        "tool": gate.tool,
        "args": gate.args,
        "argsDigest": gate.args_digest,
        "status": gate.status.value,
        "requestedAt": _time(gate.requested_at),
        "decidedAt": _time(gate.decided_at),
        "closedAt": _time(gate.closed_at),
    }
    if gate.decision is not None and gate.approver is not None:
        item["decision"] = ApprovalDecided(
            approval_id=gate.approval_id,
            call_id=gate.call_id,
            decision=gate.decision,
            args=None if gate.edited_args is None else dict(gate.edited_args),
            reason=gate.reason,
            approver=gate.approver,
        ).to_json_object()
    return {key: value for key, value in item.items() if value is not None}
