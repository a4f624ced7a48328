"""The durable shapes a store keeps besides records: sessions, submissions, attempts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from tether._limits import MAX_SEQ
from tether._payloads import Actor, ConversationParent
from tether._states import SubmissionStatus
from tether.store._priority import DEFAULT_PRIORITY_AGING, claim_rank

__all__ = (
    "MAX_SEQ",
    "WAIT_FOR_CHILDREN",
    "WAIT_FOR_TIMER",
    "Admission",
    "Attempt",
    "ClaimedHead",
    "Conversation",
    "NewSubmission",
    "SessionKey",
    "Submission",
    "SubmissionStatus",
    "TaskParent",
    "utc_now",
)


WAIT_FOR_TIMER: Final = "timer"
"""The park ``reason`` of a run asleep (``Turn.sleep``): its ``wait_until`` is when it wakes;
the engine requeues it then (``list_expired_waits``)."""


WAIT_FOR_CHILDREN: Final = "children"
"""The park ``reason`` of a parent waiting for its child submissions: a store wakes it when
its last child settles (see ``SubmissionStore``)."""


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
    tenant: str | None = None
    """The tenant it belongs to, recorded when it is created (by the admission that creates
    it, a fork of a conversation, an import), never changed after; ``None``: no tenant (an
    operator's). Not part of the log: no record carries it."""


@dataclass(frozen=True, slots=True)
class TaskParent:
    """The task call a child submission answers: the parent submission and the record (in
    the parent's conversation) of the call that spawned it. ``depth`` is the child's own
    (a root submission is depth 0, its children depth 1).

    ``max_total`` bounds the whole tree: a new child is admitted only while fewer than that
    many submissions stand below the tree's root (the ancestor of depth 0, found through the
    parent links), counted at every depth in the admission's own commit; past it, admission
    raises ``SubagentLimitReached`` and writes nothing. An idempotent re-admission returns its
    child whatever the count; a parent the store does not hold bounds nothing.
    """

    submission_id: str
    conversation_id: str
    seq: int
    call_id: str
    depth: int = 1
    max_total: int | None = None

    def conversation_parent(self) -> ConversationParent:
        """The ``parent`` link of the child's conversation."""
        return ConversationParent(
            conversation_id=self.conversation_id, seq=self.seq, reason="task", call_id=self.call_id
        )


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
    parent: TaskParent | None = None
    """Set for a child submission (a task call's): its conversation, created by this
    admission, links back to the call, and the parent is woken when its last child settles."""
    tenant: str | None = None
    """The tenant admitting it (``None``: an operator, who may admit into any session).
    A conversation this admission creates belongs to it; an existing conversation of
    another tenant (or of none) is not this tenant's to admit into: ``ConversationNotFound``,
    nothing written. A child's tenant is its parent submission's, whatever this says (when
    the store holds the parent)."""
    by: Actor | None = None
    """Who admits it, as the server verified them: a conversation this admission creates
    records them as its maker (its ``conversation_created``'s ``by``); an existing one is
    left as it is. Not part of what makes a dispatch the same one."""
    priority: int = 0
    """Higher is claimed first, among the sessions' heads (``PRIORITY_MIN..PRIORITY_MAX``;
    a session's own submissions keep their order). Not part of what makes a dispatch the
    same one: a replay keeps the first admission's."""
    priority_aging: timedelta = DEFAULT_PRIORITY_AGING
    """How long it waits, queued, to gain one step of priority (``_priority``): with the
    priority, it fixes the submission's ``claim_rank`` at admission."""

    run_at: datetime | None = None
    """A delayed dispatch: admitted ``scheduled`` (its ``wait_until`` is this time) and made
    ``queued`` by :meth:`~tether.store.TimerStore.release_due` once it is due; until then it
    holds the later submissions of its session behind it, as any unsettled head does. Only a
    :class:`~tether.store.TimerStore` honours it. Not part of what makes a dispatch the same
    one, and never claimed at its admission."""

    @property
    def idempotency_key(self) -> str:
        return self.dispatch_id if self.dispatch_id is not None else self.id

    def claim_rank(self) -> int:
        """The key its claim is ordered by (``_priority.claim_rank``), fixed at admission:
        from when it is queued, its ``run_at`` for a delayed dispatch (which so waits its turn
        behind what was queued before it came due, not ahead of it by its delay).
        ``ValueError`` for a priority or aging out of range."""
        queued_at = self.created_at if self.run_at is None else self.run_at
        return claim_rank(queued_at, self.priority, self.priority_aging)


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
    parent_submission_id: str | None = None
    """For a child submission: the submission whose task call spawned it."""
    parent_call_id: str | None = None
    depth: int = 0
    """How deep in a subagent tree: 0 for a root submission, its children 1, and so on."""
    wait_until: datetime | None = None
    """Set by a park with a deadline: a wait past it is listed by ``list_expired_waits``.
    For a ``scheduled`` submission: when it is due (its ``run_at``)."""
    version: str | None = None
    """The agent version the submission runs on: stamped by the claim that starts it (see
    ``serves`` on ``SubmissionStore.claim``); ``None`` until a versioned claim takes it."""
    tenant: str | None = None
    """Its conversation's tenant, copied at admission (a check needs no join)."""
    cancel_requested_by: Actor | None = None
    """Who asked for the cancel, as the server verified them (kept with the first stamp;
    ``None``: no one authenticated, or no cancel)."""
    priority: int = 0
    """As admitted (``NewSubmission.priority``): higher is claimed first, aging aside."""


@dataclass(frozen=True, slots=True)
class Admission:
    """What ``admit`` returns: ``created`` is false for an idempotent replay."""

    submission: Submission
    created: bool


@dataclass(frozen=True, slots=True)
class ClaimedHead:
    """One head that ``claim_runnable`` claimed: ``alone`` when nothing else of its session
    was queued as the claim committed, so no steer or follow-up can be waiting for its run
    (one admitted after the claim is announced to it)."""

    submission: Submission
    alone: bool
    slots_refused: bool = False
    """Claimed with ``slots`` (``LimitStore.claim_runnable``) whose asks were refused (its
    agent or tenant reached its limit as the claim decided): it holds no slot, and the caller
    gives the claim back."""


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
