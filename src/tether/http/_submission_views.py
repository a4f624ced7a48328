"""What ``/submissions/{id}`` answers: a submission with its attempts, its parent and its
children (:class:`SubmissionView`), and its subagent tree with the usage of each node
(:class:`SubmissionTreeNode`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from tether.engine import (
    LIMIT,
    NO_WORKER_FOR_VERSION,
    SubmissionInfo,
    SubmissionTree,
    UsageTotals,
)
from tether.http._responses import (
    TIMESTAMP,
    Settlement,
    WireActor,
    WireResponse,
    optional,
    stream_url,
    time_of,
)
from tether.store import Submission, SubmissionStatus

__all__ = (
    "AttemptView",
    "ChildSubmission",
    "HeldBy",
    "OpenSubmissions",
    "SubmissionTreeNode",
    "SubmissionView",
    "UsageView",
    "whose_limit",
)


class AttemptView(WireResponse):
    attempt_id: str
    number: int
    owner_id: str
    started_at: str = Field(**TIMESTAMP)


class ChildSubmission(WireResponse):
    """A child submission one of a submission's task calls spawned."""

    submission_id: str
    agent: str
    conversation_id: str
    status: SubmissionStatus
    call_id: str | None = optional(description="The parent's task call that spawned it.")
    stream_url: str = Field(description="The child session's stream.")

    @classmethod
    def of(cls, child: Submission) -> ChildSubmission:
        return cls(
            submission_id=child.id,
            agent=child.key.agent,
            conversation_id=child.conversation_id,
            status=child.status,
            call_id=child.parent_call_id,
            stream_url=stream_url(child.key),
        )


def _settlement(submission: Submission) -> Settlement | None:
    settled = submission.settlement
    return None if settled is None else Settlement.model_validate(dict(settled))


HeldBy = Literal["agent", "tenant"]
"""Whose limit of runs in flight holds a queued run back."""


def whose_limit(held_by: str | None) -> HeldBy | None:
    """The engine's ``held_by`` as the wire names it (``None``: not held by a limit)."""
    if held_by == "agent":
        return "agent"
    return "tenant" if held_by == "tenant" else None


class SubmissionView(WireResponse):
    """A submission: where it stands, its attempts and, once settled, its settlement; for a
    subagent's, the submission that spawned it; the children its task calls spawned."""

    submission_id: str
    dispatch_id: str | None = optional()
    agent: str
    instance: str
    session: str
    conversation_id: str
    status: SubmissionStatus
    wait_reason: str | None = optional(
        description="Why a ``waiting`` submission waits: ``approval``, ``input`` (a question "
        "for a person: GET /inputs), ``children`` (its task calls' subagents), "
        "``no_worker_for_version`` (no live worker runs the version it started on) or "
        "``version_diverged`` (its code no longer makes its recorded effects: it waits for "
        "a deploy that can go on, docs/versions.md) or ``timer`` (asleep until ``dueAt``, "
        "docs/timers.md). For a ``queued`` one, ``limit``: its agent's or its tenant's runs "
        "in flight are at their limit (docs/limits.md)."
    )
    held_by: HeldBy | None = optional(
        description="For ``waitReason: limit``: whose limit of runs in flight holds it back, "
        "its agent's or its tenant's (docs/limits.md)."
    )
    due_at: str | None = optional(
        **TIMESTAMP,
        description="When a ``scheduled`` submission is queued, or a ``waiting`` one's timer "
        "(or its deadline) wakes it (docs/timers.md).",
    )
    version: str | None = optional(
        description="The agent version it runs on: stamped when it started (docs/versions.md)."
    )
    input: JsonValue = optional()
    attempt_count: int
    attempts: list[AttemptView]
    last_error: str | None = optional()
    created_at: str | None = optional(**TIMESTAMP)
    cancel_requested_at: str | None = optional(**TIMESTAMP)
    cancel_requested_by: WireActor | None = optional(
        description="Who asked for the cancel, as the server verified them: absent when no "
        "one authenticated did (its aborted settlement says the same, ``abortedBy``)."
    )
    settled_at: str | None = optional(**TIMESTAMP)
    settlement: Settlement | None = optional()
    parent_submission_id: str | None = optional(
        description="For a subagent's submission: the submission whose task call spawned it."
    )
    parent_call_id: str | None = optional(description="That task call.")
    depth: int = Field(description="0 for a root submission, 1 for its children, and so on.")
    priority: int = Field(
        description="Higher is claimed first, aged while queued (docs/priorities.md); a "
        "subagent's is its parent's."
    )
    children: list[ChildSubmission] = Field(
        description="The submissions its task calls spawned, in spawn order."
    )

    @classmethod
    def of(cls, info: SubmissionInfo) -> SubmissionView:
        s = info.submission
        return cls(
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
            children=[ChildSubmission.of(child) for child in info.children],
        )


class OpenSubmissions(WireResponse):
    """A session's unsettled submissions, oldest first."""

    submissions: list[SubmissionView]
    more: bool = Field(description="Whether more are unsettled than the limit listed.")


class UsageView(WireResponse):
    """What model calls used: a field no call reported is omitted, and so is ``cost`` when a
    model's price is unknown (an unknown cost is never shown as zero)."""

    calls: int = Field(description="Model calls made.")
    input_tokens: int | None = optional()
    output_tokens: int | None = optional()
    reasoning_tokens: int | None = optional()
    cache_read_tokens: int | None = optional()
    cache_write_tokens: int | None = optional()
    cost: float | None = optional(description="In USD.")

    @classmethod
    def of(cls, usage: UsageTotals) -> UsageView:
        return cls(
            calls=usage.calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost=usage.cost if usage.calls else None,
        )


class SubmissionTreeNode(WireResponse):
    """A submission in its subagent tree: where it stands, what its model calls used (its
    children's, once they have settled, included), and the trees of its children."""

    submission_id: str
    agent: str
    instance: str
    session: str
    conversation_id: str
    status: SubmissionStatus
    depth: int
    parent_submission_id: str | None = optional()
    parent_call_id: str | None = optional()
    stream_url: str
    settlement: Settlement | None = optional()
    usage: UsageView
    children: list[SubmissionTreeNode] = Field(description="In spawn order.")
    truncated: bool = Field(
        description="Children were left out: the tree is larger than a response holds."
    )

    @classmethod
    def of(cls, tree: SubmissionTree) -> SubmissionTreeNode:
        s = tree.submission
        return cls(
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
            usage=UsageView.of(tree.usage),
            children=[cls.of(child) for child in tree.children],
            truncated=tree.truncated,
        )
