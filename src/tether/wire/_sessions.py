"""What the sessions routes answer: a page of sessions, what an erase removed, the agents
served, a session's conversation and its usage."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from tether._states import SessionState
from tether.wire._base import TIMESTAMP, WireResponse, optional
from tether.wire._logged import WireActor
from tether.wire._submissions import HeldBy, UsageView

__all__ = (
    "AgentItem",
    "AgentsPage",
    "ChildUsageView",
    "ConversationView",
    "ErasedView",
    "MetadataView",
    "SessionItem",
    "SessionParent",
    "SessionUsage",
    "SessionsPage",
)

WireMetadata = dict[str, str | bool | int | float]
"""A session's metadata on the wire: a flat object of scalars."""


class SessionParent(WireResponse):
    """Where a fork or a task child branched off: the parent's conversation and record (and
    for a task child, the call)."""

    conversation_id: str
    seq: int
    reason: str
    call_id: str | None = optional()


class SessionItem(WireResponse):
    """One session: its key, its log's size and age, where it stands."""

    agent: str
    instance: str
    session: str
    conversation_id: str
    created_at: str = Field(**TIMESTAMP)
    last_activity_at: str = Field(**TIMESTAMP)
    records: int
    bytes: int = Field(description="The canonical bytes of its records.")
    status: SessionState = Field(
        description="running (something is queued or running), waiting (for what: "
        "``waitReason``), failed (its last submission failed) or idle."
    )
    wait_reason: str | None = optional(
        description="What a ``waiting`` session waits for: a parked run's reason "
        "(``approval``, ``input``, ``children``, ``budget``, ``timer``, "
        "``version_diverged``), ``scheduled`` (a delayed dispatch at its head, due at "
        "``dueAt``), ``limit`` (its queued run is held back: its agent's or its tenant's "
        "runs in flight are at their limit, docs/limits.md) or ``no_worker_for_version``."
    )
    held_by: HeldBy | None = optional(
        description="For ``waitReason: limit``: whose limit holds its run back."
    )
    due_at: str | None = optional(
        **TIMESTAMP,
        description="When its scheduled run is due, or its parked run's timer wakes it.",
    )
    pending_approvals: int
    pending_inputs: int = Field(default=0, description="Questions waiting for an answer.")
    parent: SessionParent | None = optional()
    usage: UsageView | None = optional(description="With ?usage=true.")
    metadata: WireMetadata = Field(
        default_factory=dict,
        description="The session's metadata (a dispatch's ``metadata``, ``PATCH "
        "/agents/{agent}/{instance}/metadata``), keys sorted.",
    )
    stream_url: str


class MetadataView(WireResponse):
    """A session's metadata after a merge patch, keys sorted."""

    agent: str
    instance: str
    session: str
    metadata: WireMetadata


class SessionsPage(WireResponse):
    """A page of sessions, newest activity first; ``nextCursor`` is the next page's cursor,
    ``null`` when none follows (a page filtered by status may be short and still have
    one)."""

    sessions: list[SessionItem]
    next_cursor: str | None


class ErasedView(WireResponse):
    """What an erase removed."""

    agent: str
    instance: str
    session: str
    conversation_id: str
    records: int
    submissions: int
    snapshot: bool
    attachments: list[str] = Field(description="The digests of the attachments erased.")
    erased_by: WireActor | None = optional(
        description="Who erased it, as the server verified them: absent when no one "
        "authenticated did. The store keeps nothing of the session; the server's log keeps "
        "this line."
    )


class AgentItem(WireResponse):
    """A registered agent: its name, what it is for, whom it may delegate to, and the
    versions this server runs (docs/versions.md)."""

    name: str
    description: str | None = optional()
    delegates_to: list[str] = Field(description="The agents its task tool may name.")
    version: str = Field(description="The version new runs start on: the newest.")
    versions: list[str] = Field(
        description="Every version this server runs, newest first: a run started on one of "
        "them resumes here."
    )
    policy: Literal["pinned", "upgrade", "strict"] = Field(
        description="What a run started on another version does here: waits for a worker "
        "of its version (pinned, strict) or goes on with the newest code (upgrade)."
    )


class AgentsPage(WireResponse):
    agents: list[AgentItem] = Field(description="By name.")


class ConversationView(WireResponse):
    """A session's conversation: its id, its key, where it branched off, and its head (the
    seq of its last record: how many records it holds)."""

    conversation_id: str
    agent: str
    instance: str
    session: str
    created_at: str = Field(**TIMESTAMP)
    head: int
    parent: SessionParent | None = optional()
    stream_url: str


class ChildUsageView(WireResponse):
    """What one child submission's model calls used, as its parent recorded it."""

    submission_id: str
    conversation_id: str
    agent: str | None = optional()
    usage: UsageView


class SessionUsage(WireResponse):
    """A conversation's model calls in total (its children's included), and each child's."""

    conversation_id: str
    usage: UsageView
    children: list[ChildUsageView] = Field(description="In the order they finished.")
