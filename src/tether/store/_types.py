"""The durable shapes a store keeps besides records: sessions, submissions, attempts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from tether._payloads import ConversationParent

__all__ = (
    "MAX_SEQ",
    "Admission",
    "Attempt",
    "Conversation",
    "NewSubmission",
    "SessionKey",
    "Submission",
    "SubmissionStatus",
    "utc_now",
)


MAX_SEQ: Final = 2**63 - 1
"""The largest sequence number a store keeps (a signed 64-bit integer): the bound every
number that names a record is checked against, at the HTTP and the Runtime boundary."""


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, order=True)
class SessionKey:
    """``agent/instance/session``: the address of one conversation."""

    agent: str
    instance: str
    session: str = "default"

    def __str__(self) -> str:
        return f"{self.agent}/{self.instance}/{self.session}"


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation: the durable log of one session (or of a fork of one)."""

    id: str
    key: SessionKey
    created_at: datetime
    parent: ConversationParent | None = None


class SubmissionStatus(StrEnum):
    """Lifecycle of a submission: ``queued → running → terminalizing → settled``.

    A running submission may be released back to ``queued`` (retry, shutdown, lost lease)
    or parked in ``waiting`` (approval, child tasks) until it is woken.
    """

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    TERMINALIZING = "terminalizing"
    SETTLED = "settled"


@dataclass(frozen=True, slots=True)
class NewSubmission:
    """What a dispatch asks a store to admit.

    ``dispatch_id`` is the idempotency key, scoped to ``key``; it defaults to ``id``.
    ``conversation_id`` is used only if the session has no conversation yet.
    """

    id: str
    key: SessionKey
    conversation_id: str
    input: Mapping[str, Any]
    created_at: datetime
    dispatch_id: str | None = None
    trace: Mapping[str, str] | None = None
    """The caller's W3C trace context (``traceparent``, ``tracestate``), kept beside the
    input: it is not part of what makes a dispatch the same one."""

    @property
    def idempotency_key(self) -> str:
        return self.dispatch_id if self.dispatch_id is not None else self.id


@dataclass(frozen=True, slots=True)
class Submission:
    """One admitted unit of work, as stored."""

    id: str
    dispatch_id: str
    key: SessionKey
    conversation_id: str
    status: SubmissionStatus
    input: Mapping[str, Any]
    created_at: datetime
    attempt_count: int = 0
    attempt_id: str | None = None
    owner_id: str | None = None
    lease_expires_at: datetime | None = None
    fence: int = 0
    last_error: str | None = None
    wait_reason: str | None = None
    cancel_requested_at: datetime | None = None
    settlement: Mapping[str, Any] | None = None
    settled_at: datetime | None = None
    trace: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """What ``admit`` returns: ``created`` is false for an idempotent replay."""

    submission: Submission
    created: bool


@dataclass(frozen=True, slots=True)
class Attempt:
    """One claim of a submission by one worker; ``number`` counts from 1."""

    id: str
    submission_id: str
    owner_id: str
    fence: int
    number: int
    started_at: datetime


@dataclass(frozen=True, slots=True)
class ClaimSettlement:
    """Settles a running submission, for the attempt that owns it, in the same commit as an
    append (:meth:`Store.append_settled`): the exact payload and the moment it settled."""

    submission_id: str
    attempt_id: str
    settlement: Mapping[str, Any]
    settled_at: datetime
