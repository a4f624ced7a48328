"""What ``/submissions/{id}`` answers, built from the runtime's values: a submission with its
attempts, its parent and its children (:func:`submission_view`), and its subagent tree with
the usage of each node (:func:`submission_tree_node`). The models are :mod:`tether.wire`'s."""

from __future__ import annotations

from tether.engine import (
    LIMIT,
    NO_WORKER_FOR_VERSION,
    SubmissionInfo,
    SubmissionTree,
    UsageTotals,
)
from tether.http._responses import stream_url, time_of
from tether.store import Submission, SubmissionStatus
from tether.wire import (
    AttemptView,
    ChildSubmission,
    HeldBy,
    Settlement,
    SubmissionTreeNode,
    SubmissionView,
    UsageView,
)

__all__ = (
    "child_submission",
    "submission_tree_node",
    "submission_view",
    "usage_view",
    "whose_limit",
)


def _settlement(submission: Submission) -> Settlement | None:
    settled = submission.settlement
    return None if settled is None else Settlement.model_validate(dict(settled))


def whose_limit(held_by: str | None) -> HeldBy | None:
    """The engine's ``held_by`` as the wire names it (``None``: not held by a limit)."""
    if held_by == "agent":
        return "agent"
    return "tenant" if held_by == "tenant" else None


def child_submission(child: Submission) -> ChildSubmission:
    return ChildSubmission(
        submission_id=child.id,
        agent=child.key.agent,
        conversation_id=child.conversation_id,
        status=child.status,
        call_id=child.parent_call_id,
        stream_url=stream_url(child.key),
    )


def submission_view(info: SubmissionInfo) -> SubmissionView:
    s = info.submission
    return SubmissionView(
        submission_id=s.id,
        dispatch_id=s.dispatch_id,
        agent=s.key.agent,
        instance=s.key.instance,
        session=s.key.session,
        conversation_id=s.conversation_id,
        status=SubmissionStatus.WAITING if info.waits_for_a_worker else s.status,
        wait_reason=(
            NO_WORKER_FOR_VERSION
            if info.waits_for_a_worker
            else LIMIT
            if info.waits_for_a_limit
            else s.wait_reason
            if s.status is SubmissionStatus.WAITING
            else None
        ),
        held_by=whose_limit(info.held_by),
        due_at=(
            time_of(s.wait_until)
            if s.status in (SubmissionStatus.SCHEDULED, SubmissionStatus.WAITING)
            else None
        ),
        version=s.version,
        input=dict(s.input),
        attempt_count=s.attempt_count,
        attempts=[
            AttemptView(
                attempt_id=a.id,
                number=a.number,
                owner_id=a.owner_id,
                started_at=a.started_at.isoformat(),
            )
            for a in info.attempts
        ],
        last_error=s.last_error,
        created_at=time_of(s.created_at),
        cancel_requested_at=time_of(s.cancel_requested_at),
        cancel_requested_by=s.cancel_requested_by,
        settled_at=time_of(s.settled_at),
        settlement=_settlement(s),
        parent_submission_id=s.parent_submission_id,
        parent_call_id=s.parent_call_id,
        depth=s.depth,
        priority=s.priority,
        children=[child_submission(child) for child in info.children],
    )


def usage_view(usage: UsageTotals) -> UsageView:
    return UsageView(
        calls=usage.calls,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cost=usage.cost if usage.calls else None,
    )


def submission_tree_node(tree: SubmissionTree) -> SubmissionTreeNode:
    s = tree.submission
    return SubmissionTreeNode(
        submission_id=s.id,
        agent=s.key.agent,
        instance=s.key.instance,
        session=s.key.session,
        conversation_id=s.conversation_id,
        status=s.status,
        depth=s.depth,
        parent_submission_id=s.parent_submission_id,
        parent_call_id=s.parent_call_id,
        stream_url=stream_url(s.key),
        settlement=_settlement(s),
        usage=usage_view(tree.usage),
        children=[submission_tree_node(child) for child in tree.children],
        truncated=tree.truncated,
    )
