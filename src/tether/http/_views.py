"""JSON views of submissions and approvals."""

from __future__ import annotations

from typing import Any

from tether.engine import Runtime, SubmissionInfo
from tether.journal import Journal
from tether.records import ApprovalDecided, ApprovalRequested
from tether.store import SubmissionStatus

__all__ = ("approval_items", "submission_view")


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


async def approval_items(runtime: Runtime) -> list[dict[str, Any]]:
    """The gates of submissions parked for a decision (pending, or decided and about to resume)."""
    items = []
    store = runtime.store
    parked = await store.list_submissions(SubmissionStatus.WAITING)
    # Woken from an approval wait and not yet claimed again (an aborted one is on its way out).
    queued = [
        s
        for s in await store.list_submissions(SubmissionStatus.QUEUED)
        if s.wait_reason == "approval" and s.cancel_requested_at is None
    ]
    for submission in [*parked, *queued]:
        journal = await Journal.open(
            store,
            submission.conversation_id,
            fence=0,
            view=runtime.view(submission.conversation_id),
        )
        state = await journal.inspect_approval()
        if state is None or state.request is None or state.receipt is not None:
            continue
        request = state.request.payload
        assert isinstance(request, ApprovalRequested)
        item: dict[str, Any] = {
            "approvalId": request.approval_id,
            "agent": submission.key.agent,
            "instance": submission.key.instance,
            "session": submission.key.session,
            "submissionId": submission.id,
            "conversationId": submission.conversation_id,
            "tool": request.tool,
            "args": request.args,
            "argsDigest": request.args_digest,
            "status": state.status,
        }
        if state.decision is not None:
            decided = state.decision.payload
            assert isinstance(decided, ApprovalDecided)
            item["decision"] = decided.to_json_object()
        items.append(item)
    return items
