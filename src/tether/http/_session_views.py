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
        metadata=dict(info.metadata),
        stream_url=stream_url(info.key),
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
