"""What the sessions routes answer, built from the runtime's values: :func:`session_item`,
:func:`erased_view` (the models are :mod:`tether.wire`'s)."""

from __future__ import annotations

from tether.engine import SessionInfo
from tether.http._responses import (
    stream_url,
    time_of,
)
from tether.http._submission_views import usage_view, whose_limit
from tether.store import ErasedSession
from tether.wire import ErasedView, SessionItem, SessionParent

<<<<<<< HEAD
__all__ = (
    "erased_view",
    "session_item",
)


def session_item(info: SessionInfo) -> SessionItem:
    parent = info.parent
    return SessionItem(
        agent=info.key.agent,
        instance=info.key.instance,
        session=info.key.session,
        conversation_id=info.conversation_id,
        created_at=info.created_at.isoformat(),
        last_activity_at=info.last_activity_at.isoformat(),
        records=info.records,
        bytes=info.bytes,
        status=info.status,
        wait_reason=info.wait_reason,
        held_by=whose_limit(info.held_by),
        due_at=None if info.due_at is None else time_of(info.due_at),
        pending_approvals=info.pending_approvals,
        pending_inputs=info.pending_inputs,
        parent=None
        if parent is None
        else SessionParent(
            conversation_id=parent.conversation_id,
            seq=parent.seq,
            reason=parent.reason,
            call_id=parent.call_id,
        ),
        usage=None if info.usage is None else usage_view(info.usage),
        stream_url=stream_url(info.key),
=======
__all__ = ("ErasedView", "MetadataView", "SessionItem", "SessionParent", "SessionsPage")

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

    @classmethod
    def of(cls, info: SessionInfo) -> SessionItem:
        parent = info.parent
        return cls(
            agent=info.key.agent,
            instance=info.key.instance,
            session=info.key.session,
            conversation_id=info.conversation_id,
            created_at=info.created_at.isoformat(),
            last_activity_at=info.last_activity_at.isoformat(),
            records=info.records,
            bytes=info.bytes,
            status=info.status,
            wait_reason=info.wait_reason,
            held_by=whose_limit(info.held_by),
            due_at=None if info.due_at is None else time_of(info.due_at),
            pending_approvals=info.pending_approvals,
            pending_inputs=info.pending_inputs,
            parent=None
            if parent is None
            else SessionParent(
                conversation_id=parent.conversation_id,
                seq=parent.seq,
                reason=parent.reason,
                call_id=parent.call_id,
            ),
            usage=None if info.usage is None else UsageView.of(info.usage),
            metadata=dict(info.metadata),
            stream_url=stream_url(info.key),
        )


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
>>>>>>> search
    )


def erased_view(erased: ErasedSession) -> ErasedView:
    return ErasedView(
        agent=erased.key.agent,
        instance=erased.key.instance,
        session=erased.key.session,
        conversation_id=erased.conversation_id,
        records=erased.records,
        submissions=erased.submissions,
        snapshot=erased.snapshot,
        attachments=list(erased.attachments),
        erased_by=erased.by,
    )
