"""What a store keeps of a session besides its log: its summary in the sessions index, what
an erase removed, and the durable schedules a runtime fires."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tether._payloads import Actor, ConversationParent
from tether.store._metadata import MetadataValue
from tether.store._types import SessionKey

__all__ = ("ErasedSession", "ScheduleRow", "SessionRow", "TruncatedLog")


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One conversation as the sessions index lists it, newest activity first.

    ``last_activity_at`` is the time of its last record; ``records`` its head; ``bytes`` the
    canonical bytes of its records (what it costs to keep). ``cursor`` names its place in
    the order, for the page after it.

    Example::

        page = await store.list_sessions(agent="support", limit=50)
        more = await store.list_sessions(agent="support", after=page[-1].cursor)
    """

    conversation_id: str
    key: SessionKey
    created_at: datetime
    last_activity_at: datetime
    records: int
    bytes: int
    parent: ConversationParent | None = None
    cursor: str = ""
    tenant: str | None = None
    """The conversation's tenant (``Conversation.tenant``)."""
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)
    """The session's metadata (``SessionListStore.patch_session_metadata``), keys sorted."""


@dataclass(frozen=True, slots=True)
class ErasedSession:
    """What ``RetentionStore.erase_session`` removed: the conversation's records (those it held:
    fewer than its head once retention truncated it), its submissions (with their attempts),
    whether a snapshot was kept, and the attachments no other log referenced (by digest);
    and who erased it (``by``: the verified identity the runtime was given; a store erases
    without knowing, and keeps nothing of the session, who erased it included)."""

    conversation_id: str
    key: SessionKey
    records: int
    submissions: int
    snapshot: bool
    attachments: tuple[str, ...] = ()
    by: Actor | None = None


@dataclass(frozen=True, slots=True)
class TruncatedLog:
    """What ``RetentionStore.truncate_log`` did: the records it removed from the head, the first seq
    the log now holds (its ``log_truncated`` record's), and the canonical bytes the log kept
    before and after (the anchor carries the transcript, so a log of few, large messages
    may not shrink)."""

    conversation_id: str
    removed: int
    first_seq: int
    bytes_before: int
    bytes_after: int


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A durable schedule as a store keeps it: an id, the JSON of its definition (the engine's
    to read; the store does not interpret it), when it was put, and its tenant."""

    id: str
    definition: Mapping[str, Any]
    created_at: datetime
    tenant: str | None = None
    """The tenant it belongs to, set by whoever puts it (``None``: no tenant); the sessions
    it dispatches into are that tenant's."""
