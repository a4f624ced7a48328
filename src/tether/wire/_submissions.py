"""What ``/submissions/{id}`` answers: a submission with its attempts, its parent and its
children (:class:`SubmissionView`), and its subagent tree with the usage of each node
(:class:`SubmissionTreeNode`)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    JsonValue,
)

from tether._states import SubmissionStatus
from tether.wire._base import TIMESTAMP, WireResponse, optional
from tether.wire._logged import WireActor
from tether.wire._responses import Settlement

__all__ = (
    "AttemptView",
    "ChildSubmission",
    "HeldBy",
    "OpenSubmissions",
    "SubmissionTreeNode",
    "SubmissionView",
    "UsageView",
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


HeldBy = Literal["agent", "tenant"]
"""Whose limit of runs in flight holds a queued run back."""


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
