"""The store contract (docs/architecture.md §4): a small core every store implements, and
the capabilities a store may offer besides.

:class:`Store` is the core: the log (:class:`LogStore`), admission, claims and settlement
(:class:`SubmissionStore`), and the commit that ends an execution and settles its claim at
once. That is all the engine needs to run a session: turns, tool calls, steering, aborts.
Every other protocol here is a capability a feature needs (approvals need
:class:`GateStore`, subagents :class:`ChildStore`, ...): a store offers one by having its
methods (the protocols are runtime-checkable), the runtime finds out which once, when it
opens the store (:class:`~tether.store.StoreCapabilities`), and a feature whose capability
is missing raises :class:`~tether.errors.StoreCapabilityMissing` naming it.

The meaning of every method is pinned by the conformance suite
:mod:`tether.testing.storetest`, organised the same way: a backend passes the core cases
and those of each capability it offers. All methods are coroutines; no backend exception
escapes (see :mod:`tether.errors`). ``docs/how-to/store.md`` is generated from this module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import date, datetime
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from tether._payloads import AttachmentRef
from tether.records import Actor, Record, RecordDraft
from tether.store._gates import Gate, GateKind, GateStatus
from tether.store._limits import ClaimSlots, GrantTime, HeldBack, LimitAsk
from tether.store._memory_items import MEMORY_SCAN, MemoryHit, MemoryItem, Namespace
from tether.store._metadata import MetadataValue
from tether.store._sessions import ErasedSession, ScheduleRow, SessionRow, TruncatedLog
from tether.store._tokens import NewToken, TokenRow
from tether.store._types import (
    Admission,
    Attempt,
    ClaimedHead,
    ClaimSettlement,
    Conversation,
    NewSubmission,
    SessionKey,
    Submission,
    SubmissionStatus,
)
from tether.store._usage import UsageAsk, UsageLease, UsageRefusal, UsageSpent
from tether.store._versions import VersionCount, VersionsServed, WorkerRow
from tether.store._webhooks import WebhookDelivery, WebhookStatus

__all__ = (
    "AdmitAndClaimStore",
    "AttachmentStore",
    "ChangeFeed",
    "ChildStore",
    "ForkStore",
    "GateStore",
    "ImportStore",
    "LogStore",
    "MemoryItemStore",
    "OwnerLiveness",
    "RetentionStore",
    "ScheduleStore",
    "SessionListStore",
    "SnapshotStore",
    "Store",
    "SubmissionStore",
    "TimerStore",
    "TokenStore",
    "UsageStore",
    "VersionStore",
    "WaitStore",
)


@runtime_checkable
class SubmissionStore(Protocol):
    """The core's submissions: admission, claiming, leases and two-phase settlement."""

    async def admit(self, new: NewSubmission) -> Admission:
        """Admit a submission, materializing its session's conversation if needed.

        Idempotent per ``(key, dispatch id)``: an equal input returns the original
        submission with ``created=False``; a different input raises ``DispatchConflict``.

        A child (``new.parent`` set) is admitted only by a :class:`ChildStore` (the engine
        asks no other store for one): see there.

        **Tenants.** A conversation the admission creates belongs to ``new.tenant``. Into an
        existing conversation, an admission with a tenant is admitted only if that is the
        conversation's tenant; otherwise (another tenant's, or no tenant's) it raises
        ``ConversationNotFound`` (to that tenant the session does not exist), writing
        nothing, before any idempotent replay is looked up. An admission with
        ``tenant=None`` (an operator's) is admitted into any conversation. The submission
        takes its conversation's tenant (``Submission.tenant``), whatever admitted it.

        Example::

            admitted = await store.admit(NewSubmission(..., tenant="acme"))
            assert admitted.submission.tenant == "acme"
        """
        ...

    async def get_submission(self, submission_id: str) -> Submission:
        """The submission, or ``SubmissionNotFound``."""
        ...

    async def list_submissions(
        self,
        status: SubmissionStatus | None = None,
        *,
        conversation_id: str | None = None,
        unsettled: bool = False,
        tenant: str | None = None,
    ) -> list[Submission]:
        """Submissions in admission order, optionally filtered by status and conversation;
        ``unsettled`` keeps only those not settled yet; ``tenant`` keeps only that tenant's
        (``None``: every tenant's, and those of no tenant: no filter). Every combination is
        served by an index: the engine asks on every steer, abort and stream (with a
        conversation, its own index: a conversation's submissions are all of its tenant)."""
        ...

    async def list_runnable(self, limit: int = 100) -> list[Submission]:
        """One head per session (its oldest unsettled submission), only if that head is queued,
        in claim order: by ``claim_rank`` (admission time, ``priority`` agings earlier: see
        ``NewSubmission.priority``), then admission order."""
        ...

    async def claim(
        self,
        submission_id: str,
        *,
        attempt_id: str,
        owner_id: str,
        lease_expires_at: datetime,
        now: datetime,
        serves: VersionsServed | None = None,
    ) -> Submission:
        """CAS a queued session head to running: count the attempt, record it, mint a fence.

        Raises ``ClaimLost`` if the submission is not queued or not its session's head.

        **Versions.** With ``serves`` (agent -> the versions the claiming worker runs,
        newest first), a head is claimable only when its agent is a key of ``serves`` and
        its ``version`` is ``None``, listed in ``serves[agent]``, or ``serves[agent]`` holds
        ``"*"``; otherwise ``ClaimLost``. In the claim's own commit, a head whose version is
        ``None`` or matched only by ``"*"`` is stamped ``serves[agent][0]`` (how a run
        starts on, or is taken over onto, the newest version); a listed version is kept.
        A malformed ``serves`` (no versions for an agent, ``"*"`` first) is ``ValueError``.
        ``serves=None`` claims whatever the version, and stamps none.

        Example::

            claimed = await store.claim(sid, attempt_id=aid, owner_id=me,
                                        lease_expires_at=lease, now=now,
                                        serves={"assistant": ["v2", "v1"]})
            assert claimed.version in ("v2", "v1")
        """
        ...

    async def claim_runnable(
        self,
        *,
        attempt_ids: Sequence[str],
        owner_id: str,
        lease_expires_at: datetime,
        now: datetime,
        serves: VersionsServed | None = None,
    ) -> list[ClaimedHead]:
        """Claim up to ``len(attempt_ids)`` runnable session heads at once, first in claim
        order (``list_runnable``'s: higher priority first, aged), each as ``claim`` would
        (the n-th claimed gets the n-th attempt id). Concurrent callers take disjoint heads;
        a head another caller is taking is skipped, not waited for. Each says
        whether it was ``alone``: nothing else of its session queued behind it.

        With ``serves``, only heads ``claim`` would take with it are claimed, and stamped as
        it says; a head this worker cannot serve is skipped, and never keeps it from the
        heads of other sessions behind it."""
        ...

    async def list_attempts(self, submission_id: str) -> list[Attempt]:
        """The attempts of a submission in start order."""
        ...

    async def renew_lease(
        self, submission_id: str, *, attempt_id: str, lease_expires_at: datetime
    ) -> Submission:
        """Extend the lease of the running attempt; ``ClaimLost`` for any other attempt."""
        ...

    async def list_expired_leases(self, now: datetime) -> list[Submission]:
        """Running submissions whose lease expired at or before ``now``."""
        ...

    async def release(
        self,
        submission_id: str,
        *,
        attempt_id: str,
        last_error: str | None = None,
        refund_attempt: bool = False,
    ) -> Submission:
        """Running → queued for the owning attempt; keeps the attempt count unless
        ``refund_attempt`` (a graceful shutdown must not burn an attempt).

        A ``last_error`` replaces the stored one; ``None`` preserves it.
        """
        ...

    async def request_cancel(
        self, submission_id: str, *, now: datetime, by: Actor | None = None
    ) -> Submission:
        """Stamp a cancel request (the first stamp is kept, with who asked for it: ``by``,
        the verified identity of an operator's abort, kept as ``cancel_requested_by``); a
        settled submission is untouched.

        A waiting submission is requeued in the same commit (waiting → queued): nothing it
        waits for will come, and its next claim settles it before any user code runs."""
        ...

    async def reserve_settlement(
        self, submission_id: str, *, attempt_id: str, settlement: Mapping[str, Any]
    ) -> Submission:
        """Running → terminalizing for the owning attempt, storing the exact settled payload."""
        ...

    async def settle_absorbed(
        self, submission_id: str, *, settlement: Mapping[str, Any], now: datetime
    ) -> Submission:
        """Queued → settled with ``settlement``, for work another submission absorbed (a steer
        delivered into a running execution). ``ClaimLost`` unless queued; idempotent when
        already settled."""
        ...

    async def finalize_settlement(self, submission_id: str, *, now: datetime) -> Submission:
        """Terminalizing → settled; a no-op on a settled submission; ``ClaimLost`` otherwise."""
        ...


@runtime_checkable
class LogStore(Protocol):
    """The core's log: conversations and their append-only, hash-chained records."""

    async def ensure_conversation(
        self, key: SessionKey, *, conversation_id: str, created_at: datetime
    ) -> tuple[Conversation, bool]:
        """The session's conversation, creating it (and its ``conversation_created`` record at
        seq 1) with ``conversation_id`` if absent. Returns ``(conversation, created)``; of
        concurrent callers exactly one is told ``created`` (the writer that may hold fence 0:
        ``Journal.open_session``)."""
        ...

    async def get_conversation(self, conversation_id: str) -> Conversation:
        """The conversation, or ``ConversationNotFound``."""
        ...

    async def find_conversation(self, key: SessionKey) -> Conversation:
        """The conversation of a session key, or ``ConversationNotFound``."""
        ...

    async def append(
        self, conversation_id: str, drafts: Sequence[RecordDraft], *, expected_seq: int, fence: int
    ) -> list[Record]:
        """Append a batch atomically after ``expected_seq``.

        Raises ``Conflict`` if the head is not ``expected_seq`` (checked first), then
        ``Fenced`` if ``fence`` is below the conversation's fence. Nothing is written on error.
        """
        ...

    async def read(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> list[Record]:
        """Up to ``limit`` records with seq > ``after_seq``, in order."""
        ...

    async def head(self, conversation_id: str) -> int:
        """The seq of the last record."""
        ...

    async def mint_fence(self, conversation_id: str) -> int:
        """Advance and return the conversation's fence, superseding every earlier writer."""
        ...

    async def verify(self, conversation_id: str) -> int:
        """Re-derive the chain: the number of records, or ``LogTampered`` at the first bad seq."""
        ...

    async def wait_for_append(self, conversation_id: str, *, after_seq: int) -> int:
        """Wait until the head passes ``after_seq``; return it. Bound it with ``asyncio.timeout``.

        Wakes at once for appends through this store object, and also sees appends made by
        other processes (by notification where the backend has one, else by polling).
        """
        ...


@runtime_checkable
class Store(SubmissionStore, LogStore, Protocol):
    """The core every store implements: the log, the submissions, the one commit that spans
    both (``append_settled``), a heartbeat, and lifecycle. A store that offers only this runs
    sessions end to end; each capability below adds what one feature needs.

    Example::

        async with MyStore() as store:  # any Store
            async with Runtime(agents, store=store) as runtime:
                receipt = await runtime.dispatch("support", "acme", "hello")
    """

    url: str

    async def append_settled(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int,
        fence: int,
        settle: ClaimSettlement,
    ) -> list[Record]:
        """``append`` and settle in one atomic commit: the submission goes running → settled
        (with ``settle.settlement`` and ``settled_at``) for the attempt that owns it.

        The one-commit form of reserve → append → finalize, for a writer that owns both the
        claim and the log. Raises ``ClaimLost`` (checked first), then ``Conflict`` and
        ``Fenced`` as ``append`` does; nothing is written on error.
        """
        ...

    async def ping(self) -> None:
        """Prove the store can write now: a small write that commits (a heartbeat), not a
        read. Raises ``StoreUnavailable`` when it cannot (a full disk, a lost database, a
        closed store). What a readiness probe asks.

        Example::

            await store.ping()  # returns once a heartbeat committed
        """
        ...

    async def close(self) -> None:
        """Flush and release every resource; idempotent."""
        ...

    async def __aenter__(self) -> Self:
        """The store itself, for ``async with``."""
        ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """``close``, at the end of ``async with``."""
        ...


# --- capabilities ---------------------------------------------------------------------


@runtime_checkable
class AdmitAndClaimStore(Protocol):
    """Capability ``admit_and_claim``: admission and its claim in one commit. Without it, an
    admission is claimed by the claim loop instead (a commit more, and a claim tick later)."""

    async def admit_and_claim(
        self,
        new: NewSubmission,
        *,
        attempt_id: str,
        owner_id: str,
        lease_expires_at: datetime,
        now: datetime,
        serves: VersionsServed | None = None,
        slots: ClaimSlots | None = None,
    ) -> Admission:
        """Admit as ``admit`` does and, in the same commit, claim the new submission as
        ``claim`` would (with ``serves``, if given) if it is its session's head: the worker
        that admits it runs it, at the cost of one commit instead of two. An idempotent
        replay is returned as it stands, and a submission behind an unsettled one of its
        session, or of an agent ``serves`` does not name, stays queued; the returned
        submission is running under ``attempt_id`` exactly when it was claimed. With
        ``slots`` (limits of runs in flight, as ``LimitStore.claim_runnable`` takes
        them), in the same commit: the slots ``slots.give_back`` names are given back first,
        and the submission is claimed only if it takes every slot ``slots.asks`` names for
        it as claimed (its holder ``attempt_id``) at ``now``; else it stays queued."""
        ...


@runtime_checkable
class AttachmentStore(Protocol):
    """Capability ``attachments``: content-addressed blobs, keyed ``sha256:<hex>``. The
    engine keeps revoked credentials there (``Runtime.revoke``, the console's sign-out)."""

    async def put_attachment(self, data: bytes, *, media_type: str) -> AttachmentRef:
        """Store bytes (idempotent) and return their reference."""
        ...

    async def get_attachment(self, digest: str) -> tuple[AttachmentRef, bytes]:
        """The reference and bytes, or ``AttachmentNotFound``."""
        ...


@runtime_checkable
class SnapshotStore(Protocol):
    """Capability ``snapshots``: one opaque snapshot per conversation, the journal's cache
    of what taking a long log in derived. Without it, a reader takes the records in one by
    one."""

    async def put_snapshot(self, conversation_id: str, *, seq: int, body: bytes) -> None:
        """Keep ``body``, a reader's snapshot of records 1..``seq``, in place of the one kept
        (if any) when ``seq`` is beyond its seq; otherwise keep the one kept. One per
        conversation; ``fork`` gives the child the parent's if it covers only records they
        share (``seq <= at_seq``). The store does not read it: a snapshot is a cache derived
        from the log, which stays the only truth. ``ConversationNotFound`` for an unknown
        conversation."""
        ...

    async def get_snapshot(self, conversation_id: str) -> tuple[int, bytes] | None:
        """The kept snapshot as ``(seq, body)``, or ``None`` (also for an unknown conversation)."""
        ...


@runtime_checkable
class ForkStore(Protocol):
    """Capability ``forks``: a new conversation that starts as a prefix of another
    (``Runtime.fork``, ``POST /conversations/{id}/fork``)."""

    async def fork(
        self,
        conversation_id: str,
        *,
        at_seq: int,
        key: SessionKey,
        new_conversation_id: str,
        created_at: datetime,
        by: Actor | None = None,
    ) -> Conversation:
        """A new conversation for ``key`` whose records 1..``at_seq`` are the parent's, verbatim,
        followed by its ``conversation_created`` record (and the parent's snapshot, if it
        covers no more than those records). It belongs to the parent's tenant. ``by``, who
        asked for the fork as the server verified them, is recorded on that record."""
        ...


@runtime_checkable
class WaitStore(Protocol):
    """Parking: a running submission that waits (for a person, for its children) holds no
    lease until it is woken. Offered by every store that offers gates or children; never
    asked for on its own."""

    async def park(
        self,
        submission_id: str,
        *,
        attempt_id: str,
        reason: str,
        expected_seq: int | None = None,
        wait_until: datetime | None = None,
    ) -> Submission:
        """Running → waiting for the owning attempt (``reason``: ``approval``, ``children``);
        no lease is held and the attempt is refunded (waiting is not failing). ``ClaimLost``
        for any other attempt. ``wait_until`` is kept until the next park (``None`` clears
        it): past it, the wait is listed by ``list_expired_waits``.

        Unless the wait may already be over: if a cancel was requested, or the conversation's
        head has moved past ``expected_seq`` (the head the attempt last saw: the decision it
        would wait for may be in the log already), or it would wait for ``children`` and
        none of its children is unsettled, it goes running → queued instead, refunded too,
        so that the next claim reads the log (and its children) as they are now. Check the
        returned status.
        """
        ...

    async def unpark(self, submission_id: str) -> Submission:
        """Waiting → queued; ``ClaimLost`` if the submission is not waiting."""
        ...

    async def list_expired_waits(self, now: datetime) -> list[Submission]:
        """Waiting submissions whose ``wait_until`` is at or before ``now``."""
        ...


@runtime_checkable
class TimerStore(Protocol):
    """Capability ``timers``: delayed dispatches and the engine's next wake-up. A store that
    offers it admits a ``NewSubmission.run_at`` as ``scheduled`` (its ``wait_until`` the due
    time), makes it ``queued`` when due (:meth:`release_due`) or when a cancel is requested
    (``request_cancel``: its next claim settles it ``aborted`` without running it), and says
    when the earliest thing anything waits for is due (:meth:`next_due`), so that the claim
    loop sleeps until then instead of polling for it."""

    async def release_due(self, now: datetime) -> list[Submission]:
        """Scheduled → queued for every scheduled submission due at or before ``now``, in one
        commit, each at most once (a second call, or a peer's, finds it queued already);
        returns those it moved, in admission order. Wakes the claimers as an admission does."""
        ...

    async def next_due(self) -> datetime | None:
        """The earliest ``wait_until`` of a scheduled submission or of a waiting one (a timer,
        a deadline on children), or ``None`` when nothing waits for a time."""
        ...


@runtime_checkable
class GateStore(WaitStore, Protocol):
    """Capability ``gates``: approvals and questions to a person (gated tools,
    ``Turn.ask``). A run parks on a gate; a decision wakes it in the commit that records
    it; the gates index lists them (``Runtime.approvals``, ``GET /approvals``)."""

    async def append_decision(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int,
        wake: str | None,
    ) -> list[Record]:
        """Append a host's decision on parked work (``approval_decided``) and, in the same
        atomic commit, wake ``wake``, the submission that waits for it: waiting → queued if
        it is waiting; in any other status (or unknown) it is left as it is (an attempt that
        has yet to park finds the head moved: see ``park``).

        A decision is no writer's turn: it is appended at the conversation's current fence,
        superseding no one and refused by no fence. Raises ``Conflict`` if the head is not
        ``expected_seq``; nothing is written on error.
        """
        ...

    async def list_gates(
        self,
        *,
        status: GateStatus | None = None,
        agent: str | None = None,
        instance: str | None = None,
        tool: str | None = None,
        limit: int = 100,
        after: str | None = None,
        kind: GateKind | None = None,
        tenant: str | None = None,
    ) -> list[Gate]:
        """Up to ``limit`` gates (``None`` filters match anything: ``kind=None`` lists
        approvals and inputs alike, ``tenant=None`` every tenant's and those of no tenant;
        there is no filter for the gates of no tenant), each with its conversation's
        ``tenant``, in the order of their requests (request time,
        conversation id, request seq), oldest first: those past ``after``, a gate's
        ``cursor`` (``InvalidCursor`` for any other string).

        The gates are an index of the logs, kept in the commit of every append of a record
        that opens (``approval_requested``, ``input_requested``), decides
        (``approval_decided``, ``input_answered``) or closes (a denied ``tool_outcome`` of a
        pending gate's call) one; a fork's copied records stay its parent's. A decided gate
        stays decided; only a pending one closes. Every page of every filter is served by
        an index, and a listing of one kind never reads the other kind's gates.

        Example::

            page = await store.list_gates(status=GateStatus.PENDING, agent="support")
            more = await store.list_gates(status=GateStatus.PENDING, after=page[-1].cursor)
            asked = await store.list_gates(status=GateStatus.PENDING, kind=GateKind.INPUT)
            theirs = await store.list_gates(status=GateStatus.PENDING, tenant="acme")
        """
        ...


@runtime_checkable
class ChildStore(WaitStore, Protocol):
    """Capability ``children``: subagents (``Runtime(subagents=...)``). A child is admitted
    with a ``TaskParent`` (``NewSubmission.parent``): it keeps its parent's submission id,
    call id and its depth; the conversation it materializes carries the parent's link in
    its ``conversation_created`` record (an existing conversation is left as it is), and
    the child, like its conversation, belongs to the parent submission's tenant (the
    ``NewSubmission.tenant`` of a child whose parent the store holds is not read). A
    ``max_total`` on the ``TaskParent`` bounds the submissions below the tree's root
    (``SubagentLimitReached``, writing nothing; a replayed admission returns its child).

    **The wake of a parent.** Every operation that settles a child submission
    (``finalize_settlement``, ``settle_absorbed``, ``Store.append_settled``) also, in the
    same commit, requeues its parent (waiting → queued) if the parent waits for
    ``children`` and this was its last unsettled child. So a parent is never left waiting
    on children that have all settled, whatever a crash cuts.
    """

    async def list_children(self, submission_id: str) -> list[Submission]:
        """The child submissions of a submission (those admitted with it as their
        ``parent``), in admission order; empty for an unknown id. Served by an index."""
        ...


@runtime_checkable
class SessionListStore(Protocol):
    """Capability ``sessions``: the sessions index (``Runtime.sessions``,
    ``GET /sessions``, the retention pass)."""

    async def list_sessions(
        self,
        *,
        agent: str | None = None,
        instance: str | None = None,
        limit: int = 100,
        after: str | None = None,
        tenant: str | None = None,
        metadata: Mapping[str, str] | None = None,
        text: str | None = None,
        since: datetime | None = None,
    ) -> list[SessionRow]:
        """Up to ``limit`` conversations (forks and task children included), newest activity
        first (the time of the last record, then the conversation id), optionally of one
        agent, or one agent and instance, and of one ``tenant`` (``None``: every tenant's and
        those of no tenant; there is no filter for those of no tenant), each with its
        ``tenant``; those past ``after``, a row's ``cursor``
        (``InvalidCursor`` for any other string). ``last_activity_at``, ``records`` and
        ``bytes`` are kept in the commit of every append; every page of every filter is
        served by an index.

        The search filters narrow the same order (``tether.store._metadata``,
        ``tether.store._search_text``): ``metadata`` keeps the sessions whose metadata holds
        each key with that text form (``InvalidMetadata`` for a filter out of bounds);
        ``text`` those one of whose messages (a user's, a steer, an assistant's completed
        text) holds every word of it (a text without words filters nothing); ``since``
        those whose last activity is at or after it. Each is served by an index (the
        metadata's, the messages' full text, the activity's), the page then put in order.

        Example::

            page = await store.list_sessions(agent="support", limit=50)
            theirs = await store.list_sessions(tenant="acme", after=page[-1].cursor)
            found = await store.list_sessions(metadata={"customer": "acme"}, text="refund")
        """
        ...

    async def patch_session_metadata(
        self, conversation_id: str, patch: Mapping[str, Any]
    ) -> dict[str, MetadataValue]:
        """Apply an RFC 7396 merge ``patch`` to the conversation's metadata in one commit (a
        key set to ``None`` is removed, any other value replaces the key's) and return the
        metadata it leaves, keys sorted. ``InvalidMetadata`` (nothing written) for a patch
        that is no object of scalars and nulls or a result out of bounds;
        ``ConversationNotFound`` for an unknown id. The metadata goes with the
        conversation (an erase removes it; a fork or an import starts with none).

        Example::

            await store.patch_session_metadata(cid, {"customer": "acme", "draft": None})
        """
        ...


@runtime_checkable
class RetentionStore(Protocol):
    """Capability ``retention``: removing what is kept for good, a whole session
    (``Runtime.erase_session``) or a log's head (the retention pass)."""

    async def erase_session(self, conversation_id: str) -> ErasedSession:
        """Remove a conversation for good, in one commit: its records, its snapshot, its gates,
        its submissions and their attempts, and the attachments that no other conversation's
        records reference (a fork that copied a reference keeps the attachment). The
        caller decides whether the session may go (the store erases a running one too).
        ``ConversationNotFound`` for an unknown id.

        Example::

            erased = await store.erase_session(conversation_id)
            print(erased.records, erased.submissions, erased.attachments)
        """
        ...

    async def truncate_log(self, conversation_id: str, anchor: RecordDraft) -> TruncatedLog:
        """Remove the head of a log for good, in one commit: every record up to the seq the
        ``anchor`` names (its :class:`~tether.records.LogTruncated` payload's ``removed``),
        which the anchor takes the place of, sealed there with the removed record's
        ``prevHash`` and ``hash`` (so the next record links to it, and ``verify`` checks the
        chain from it). A snapshot at or before that seq goes too; the head, the last
        activity, the submissions, the gates and the attachments stay (the anchor's
        transcript may reference them). ``read`` from before the anchor starts at it;
        ``fork`` before it is ``SeqTruncated``. ``SeqOutOfRange`` past the head;
        ``SeqTruncated`` at or before an earlier anchor; ``ValueError`` for a draft that is
        no ``log_truncated`` or was built from another record than the one held there;
        ``ConversationNotFound`` for an unknown id. The caller (the engine's pruner) decides
        where a log may be cut and what the anchor carries.

        Example::

            truncated = await store.truncate_log(conversation_id, anchor)
            print(truncated.removed, truncated.first_seq, truncated.bytes_after)
        """
        ...


@runtime_checkable
class ImportStore(Protocol):
    """Capability ``import``: an exported log taken back in (``tether import``,
    ``VerifiedExport.import_into``)."""

    async def import_conversation(
        self, conversation: Conversation, records: Iterable[Record], *, tenant: str | None = None
    ) -> bool:
        """Create ``conversation`` holding exactly ``records`` (its whole log, from its
        ``conversation_created`` at seq 1, or from the ``log_truncated`` record retention
        left, with their hashes), in one commit: how an exported log comes back. Nothing is
        written unless the records chain (``LogTampered`` at the first bad seq), the first
        is the ``conversation_created`` of ``conversation`` (its id, key and parent), and
        neither the id nor the session key is taken (``SessionExists``). Importing a log
        the store already holds, identical to its head hash and of the same tenant, is a
        no-op: returns ``False``; ``True`` when it was created. The conversation belongs to
        ``tenant`` (an export carries none; ``conversation.tenant`` is not read).

        ``records`` is iterated once, in order, each record checked as it comes and written
        in batches inside the one transaction: a generator reading a file imports a log of
        any length in bounded memory (the store never holds the whole log; a record that
        fails rolls the import back). Iterating it may happen on the store's writer thread.

        Example::

            created = await store.import_conversation(conversation, records, tenant="acme")
        """
        ...


@runtime_checkable
class ScheduleStore(Protocol):
    """Capability ``schedules``: durable schedules a runtime fires (``Runtime(schedules=...)``,
    ``/schedules``)."""

    async def put_schedule(self, schedule: ScheduleRow) -> ScheduleRow:
        """Keep a schedule; idempotent for an equal definition and tenant under the same id,
        which returns the one kept; a different definition (or tenant) under a kept id is
        ``DispatchConflict``."""
        ...

    async def list_schedules(self, *, tenant: str | None = None) -> list[ScheduleRow]:
        """Every kept schedule, oldest first (then by id); with ``tenant``, only that
        tenant's (``None``: every schedule, no filter), served by an index.

        Example::

            theirs = await store.list_schedules(tenant="acme")
        """
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Forget a schedule; ``False`` if none had that id."""
        ...


@runtime_checkable
class VersionStore(Protocol):
    """Capability ``versions``: agent versions in rolling deploys. What each unsettled
    submission runs on (``Submission.version``, stamped by a claim with ``serves``: see
    ``SubmissionStore.claim``), moving parked runs to another version, and which workers
    serve which versions (``tether versions``). Whether a worker still lives is not decided
    here: the engine filters ``list_workers`` with ``OwnerLiveness.dead_owners``; a store
    that offers ``liveness`` also deletes an owner's worker row when it forgets the owner
    (``forget_owner``) or the owner gives its lock up (``release_liveness``)."""

    async def set_version(
        self, submission_id: str, *, expected: str | None, version: str
    ) -> Submission:
        """CAS the version of a queued or waiting submission from ``expected`` to
        ``version``, in one commit (how parked runs are upgraded in bulk). Raises
        ``VersionConflict``, writing nothing, when the stored version is not ``expected``
        or the submission is running, terminalizing or settled; ``SubmissionNotFound`` for
        an unknown id; ``ValueError`` for a ``version`` that is empty or ``"*"``.

        Example::

            moved = await store.set_version(sid, expected="v1", version="v2")
        """
        ...

    async def version_counts(self, agent: str | None = None) -> list[VersionCount]:
        """The unsettled submissions (scheduled, queued, running, waiting), of ``agent`` or of
        every agent, grouped by agent, version (``None`` included), status and wait reason, each
        group with its count; ordered by those four, ``None`` first, compared as code
        points. Terminalizing ones are left out (they are ending).

        Example::

            for row in await store.version_counts("assistant"):
                print(row.version, row.status, row.wait_reason, row.count)
        """
        ...

    async def put_worker(self, owner_id: str, serves: VersionsServed, *, now: datetime) -> None:
        """Keep (insert or replace) what worker ``owner_id`` serves. ``since`` stays as it
        was when ``serves`` is unchanged, and becomes ``now`` otherwise. ``ValueError`` for
        a malformed ``serves`` (see ``SubmissionStore.claim``); the store is untouched."""
        ...

    async def list_workers(self) -> list[WorkerRow]:
        """Every kept worker, by owner id (compared as code points), with its versions per
        agent (agents in name order) and its ``since``."""
        ...

    async def forget_worker(self, owner_id: str) -> None:
        """Drop worker ``owner_id``'s row; idempotent."""
        ...


@runtime_checkable
class TokenStore(Protocol):
    """Capability ``tokens``: the API tokens an operator issued (``tether tokens``), each
    kept by the SHA-256 digest of its secret, never the secret. The store does not
    interpret scopes, tenants or agents, nor decide whether a token is expired or revoked:
    ``tether.auth.StoredTokens`` does, from the row :meth:`find_token` reads."""

    async def put_token(self, new: NewToken) -> TokenRow:
        """Keep a new token, unrevoked; the row kept (times in UTC, to the microsecond).
        Raises ``TokenExists`` (naming whether the id or the digest is taken), writing
        nothing, when a kept token has its id or its digest; ``ValueError`` for a malformed
        one (an empty id or subject, a digest that is not 64 lowercase hex digits, a naive
        time).

        Example::

            row = await store.put_token(NewToken(id="tok_1", digest=digest,
                                                 subject="support-1", created_at=now))
        """
        ...

    async def find_token(self, digest: str) -> TokenRow | None:
        """The token whose secret has this digest, revoked and expired ones included, or
        ``None``: one indexed read, on the path of every authenticated request."""
        ...

    async def list_tokens(
        self,
        *,
        subject: str | None = None,
        tenant: str | None = None,
        include_revoked: bool = False,
    ) -> list[TokenRow]:
        """The kept tokens of ``subject`` and of ``tenant`` (``None``: any), by id compared
        as code points (for the ids ``issue_token`` makes, the order they were issued in);
        the revoked ones only with ``include_revoked``. Expired ones are listed."""
        ...

    async def revoke_token(self, token_id: str, *, now: datetime) -> TokenRow:
        """Revoke token ``token_id`` at ``now``; the row as it now stands. Idempotent: a
        revoked token keeps its first ``revoked_at``. ``TokenNotFound`` for an unknown id."""
        ...


@runtime_checkable
class ChangeFeed(Protocol):
    """Capability ``change_feed``: wake-ups across processes, offered by a store that has
    them (PostgreSQL's LISTEN/NOTIFY). Without one, the engine polls."""

    def listen(
        self, topic: str, event: asyncio.Event | None = None
    ) -> AbstractContextManager[asyncio.Event]:
        """Set ``event`` (or a new one) whenever ``topic`` is notified in any process:
        ``work`` (a submission may have become runnable), ``settled:<submission id>``, or
        ``steer:<conversation id>`` (a steer or follow-up was admitted for a running
        execution)."""
        ...


@runtime_checkable
class OwnerLiveness(Protocol):
    """Capability ``liveness``: liveness locks of workers, offered by a store that can tell
    a dead process from a slow one: an OS file lock beside a SQLite file, a session-level
    advisory lock on PostgreSQL.
    A worker holds its owner id's lock for as long as it lives; the operating system (or the
    database, when the session ends) frees it when the process dies, even by ``kill -9``. So
    a worker that finds an owner's lock free may take that owner's claims over at once,
    instead of waiting out their leases (which still bound a process that is only paused).
    Without it, the engine waits for leases to expire.

    Example::

        liveness = StoreCapabilities.of(store).liveness
        if liveness is not None:
            await liveness.hold_liveness(owner_id)
    """

    async def hold_liveness(self, owner_id: str) -> None:
        """Take ``owner_id``'s lock and hold it until ``release_liveness``, ``close``, or the
        process's end. ``StoreUnavailable`` if a live process holds it already."""
        ...

    async def release_liveness(self, owner_id: str) -> None:
        """Give the lock up and forget the owner (an orderly shutdown); idempotent."""
        ...

    async def dead_owners(self, owner_ids: Collection[str]) -> set[str]:
        """Those of ``owner_ids`` that took their lock here and no longer hold it: their
        process died. An owner that never took one (a worker of another kind, or of an older
        version) is never among them, nor is one whose lock this process holds."""
        ...

    async def forget_owner(self, owner_id: str) -> None:
        """Drop what is kept of a dead owner (once its claims are released), unless its lock
        is held again meanwhile."""
        ...


@runtime_checkable
class LimitStore(Protocol):
    """Capability ``limits``: shared rate limits and concurrency (docs/limits.md), kept as
    expiring holds per key (see :mod:`tether.store._limits`), so they hold across every
    process using the store. Each grant is decided and written in one transaction serialized
    per key; times are the caller's clock (the engine's), as leases are.

    Example::

        ask = LimitAsk(key="model:openai", holder=call_id, owner_id=me,
                       slot_expires_at=now + lease, concurrency=4, rate=60, per_seconds=60)
        retry_at = await store.acquire_limit(ask, now=now)
        if retry_at is None:
            try:
                ...  # the call
            finally:
                await store.release_limit("model:openai", holder=call_id)
    """

    async def acquire_limit(self, ask: LimitAsk, *, now: GrantTime) -> datetime | None:
        """Drop the key's holds expired at ``now`` (a moment, or a clock read once the key
        is locked: :data:`~tether.store.GrantTime`); then, if the holds left allow ``ask``
        (``tether.store._limits.decide``), take its slot (or move its holder's slot to the
        new expiry) and its call, and answer ``None``; else take nothing and answer the
        earliest time to ask again. ``ValueError`` for a malformed ask (writing nothing)."""
        ...

    async def release_limit(self, key: str, *, holder: str, calls: int = 0) -> None:
        """Give back ``holder``'s slot of ``key``; idempotent (a slot that expired, or was
        never taken, is nothing to give back). ``calls``: also give back that many of the
        calls ``holder`` was granted on ``key`` (permits of a lease never spent: their
        places in the window are free again), at most as many as it holds."""
        ...

    async def renew_limits(self, owner_id: str, *, expires_at: datetime) -> int:
        """Move every slot ``owner_id`` holds, on any key, to expire at ``expires_at``: a
        live worker's heartbeat. How many it moved."""
        ...

    async def release_owner_limits(self, owner_id: str) -> int:
        """Give back every slot of ``owner_id`` (a worker known dead), without waiting for
        them to expire; how many."""
        ...

    async def spend_limit(self, key: str, *, tokens: int, now: datetime) -> None:
        """Count ``tokens`` spent against ``key``'s ``tokens_per_minute`` for the minute after
        ``now``. ``ValueError`` for a negative amount."""
        ...

    async def pause_limit(self, key: str, *, until: datetime) -> None:
        """Grant nothing of ``key`` before ``until`` (a provider's ``Retry-After``); a later
        pause already kept stays."""
        ...

    async def limit_slots(self, prefix: str, *, now: datetime) -> dict[str, int]:
        """The live slots (expiring after ``now``) of every key starting with ``prefix``, by
        key; keys with none are left out."""
        ...

    async def claim_runnable(
        self,
        *,
        attempt_ids: Sequence[str],
        owner_id: str,
        lease_expires_at: datetime,
        now: datetime,
        serves: VersionsServed | None = None,
        held_back: HeldBack | None = None,
        slots: ClaimSlots | None = None,
    ) -> list[ClaimedHead]:
        """:meth:`Store.claim_runnable`, passing over the heads ``held_back`` names (their
        agent or tenant is at its limit): a head passed over is not counted against the
        batch, and keeps no other session's head from being claimed. With ``slots``, in the
        same transaction: the slots ``slots.give_back`` names are given back first (even if
        nothing is claimed), and each head claimed takes ``slots.asks(head)`` as
        :meth:`acquire_limit` would at ``now`` (every one, or none and ``slots_refused``)."""
        ...


@runtime_checkable
class UsageStore(Protocol):
    """Capability ``usage``: what each tenant spent per UTC day, added up in the transaction
    of every append that spends (see :mod:`tether.store._usage`), and the reservations of its
    model calls in flight against its period budgets (docs/budgets.md). Times are the
    caller's clock (the engine's), as leases are; a record's day is its own time's.

    Example::

        spent = await store.tenant_usage("acme", start=date(2026, 12, 1), end=date(2027, 1, 1))
        refused = await store.reserve_usage(
            UsageAsk("acme", conversation_id, me, now + lease,
                     (UsageLimit(today, tomorrow, model_calls=100),)),
            now=now,
        )
    """

    async def append_spending(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int,
        fence: int,
        usage_holder: str,
        settle: ClaimSettlement | None = None,
    ) -> list[Record]:
        """``LogStore.append`` (``Store.append_settled`` given ``settle``), where each model
        call the records complete gives back one reservation of ``usage_holder`` (a worker's
        share) rather than of the conversation, in the append's own transaction."""
        ...

    async def tenant_usage(self, tenant: str, *, start: date, end: date) -> UsageSpent:
        """What ``tenant``'s conversations spent on the UTC days ``start <= day < end``, as
        the records appended so far say (a conversation of no tenant counts under none)."""
        ...

    async def reserve_usage(self, ask: UsageAsk, *, now: datetime) -> UsageRefusal | None:
        """Drop the tenant's reservations expired at ``now``; then, if no limit of the ask
        is used up by what was spent over its days plus the live reservations
        (``tether.store._usage.decide_usage``), reserve one model call for ``ask.holder``
        (holding the largest single call's tokens and cost of those days) and answer
        ``None``; else reserve nothing and answer why. Decided and written in one
        transaction serialized per tenant. ``ValueError`` for a malformed ask."""
        ...

    async def lease_usage(self, ask: UsageAsk, *, now: datetime) -> UsageLease | UsageRefusal:
        """As :meth:`reserve_usage`, reserving up to ``ask.calls`` calls for ``ask.holder``
        at once (a worker's share, sized by ``tether.store._usage.share_of``: no more than
        half of what each limit has left), and answering what it reserved (at least one
        call) or why it reserved none."""
        ...

    async def release_usage(self, tenant: str, *, holder: str, calls: int = 1) -> None:
        """Give back ``calls`` of ``holder``'s reservations, those holding least first (a
        call that failed, unanswered; a share's calls never made); fewer held is fewer to
        give back. The append of a call's completion gives one back itself, in its own
        transaction."""
        ...

    async def renew_usage(self, owner_id: str, *, expires_at: datetime) -> int:
        """Move every reservation ``owner_id`` holds to expire at ``expires_at``: a live
        worker's heartbeat. How many it moved."""
        ...


@runtime_checkable
class MemoryItemStore(Protocol):
    """Capability ``memory``: long-term memory (``tether.Memory``), JSON values kept under a
    namespace (a tuple of labels, outermost first: ``(tenant, user, agent)``) and a key,
    across sessions. A namespace's labels are non-empty strings without control characters,
    and a prefix of one (``()``: every namespace) selects the namespaces that start with its
    labels; each of these reads is served by one index range. What each item's keywords
    are, how an embedding is kept and how hits are scored is shared by every backend
    (:mod:`tether.store._memory_items`), so they answer alike. ``ValueError`` for a
    malformed namespace, key, vector or page, writing nothing."""

    async def put_memory(
        self,
        namespace: Namespace,
        key: str,
        value: Any,
        *,
        text: str,
        embedding: Sequence[float] | None,
        now: datetime,
    ) -> MemoryItem:
        """Keep ``value`` (JSON) under ``namespace`` and ``key``, replacing what was kept
        there (whose ``created_at`` it keeps; ``updated_at`` becomes ``now``), in one
        commit, with ``text`` (what keyword search matches) and ``embedding`` (``None``:
        none, so semantic search passes it over). Putting the same again is harmless (an
        idempotent write). The item as kept.

        Example::

            item = await store.put_memory(("acme", "u-1"), "diet", {"likes": "tea"},
                                          text="likes tea", embedding=None, now=now)
        """
        ...

    async def get_memory(self, namespace: Namespace, key: str) -> MemoryItem | None:
        """The item kept under ``namespace`` and ``key``, or ``None``."""
        ...

    async def delete_memory(self, namespace: Namespace, key: str) -> bool:
        """Forget the item under ``namespace`` and ``key``; ``False`` if there was none."""
        ...

    async def list_memory(
        self, prefix: Namespace, *, limit: int = 100, offset: int = 0
    ) -> list[MemoryItem]:
        """The items under ``prefix``, by namespace then key (compared as code points),
        ``limit`` of them from ``offset``."""
        ...

    async def memory_namespaces(
        self, prefix: Namespace, *, limit: int = 100, offset: int = 0
    ) -> list[Namespace]:
        """The namespaces under ``prefix`` that hold an item, in order (as
        :meth:`list_memory`), ``limit`` of them from ``offset``."""
        ...

    async def search_memory(
        self,
        prefix: Namespace,
        *,
        text: str | None = None,
        vector: Sequence[float] | None = None,
        limit: int = 10,
        offset: int = 0,
        scan: int = MEMORY_SCAN,
    ) -> list[MemoryHit]:
        """Search the items under ``prefix``. With ``text``, only those whose keywords hold
        every keyword of ``text`` (a text of no keywords matches every item). Without
        ``vector``: those, most recently updated first (then by namespace and key), with no
        score. With ``vector``: of those that have an embedding, the ``scan`` most recently
        updated (the brute-force bound: no more are read) ranked by the cosine similarity of
        their embedding to ``vector`` (one of another length is passed over), most similar
        first. The page ``limit`` from ``offset`` of either order.

        Example::

            hits = await store.search_memory(("acme",), text="tea", vector=embedding)
        """
        ...

    async def erase_memory(
        self, prefix: Namespace, *, updated_before: datetime | None = None
    ) -> int:
        """Remove for good, in one commit, every item under ``prefix`` (a tenant's, a
        user's: erasure); how many. ``()`` erases all of them. With ``updated_before``, only
        those last put before it (retention: memory idle past a limit)."""


@runtime_checkable
class WebhookStore(Protocol):
    """Capability ``webhooks``: the outbound webhook outbox (docs/how-to/webhooks.md). Rows
    are :class:`~tether.store._webhooks.WebhookDelivery`; times are the caller's clock (the
    engine's). Every method is one commit.

    Example::

        await store.put_webhook_deliveries([delivery])
        for due in await store.claim_webhook_deliveries(now, lease_until=now + lease, limit=10):
            ...  # POST it, then finish_webhook_attempt(due.id, attempt=due.attempts, ...)
    """

    async def put_webhook_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> None:
        """Keep each delivery whose id is new, as given; one whose id is kept already is
        left as it is (a delivery derived twice is one delivery)."""
        ...

    async def release_webhook_delivery(
        self, delivery_id: str, *, body: bytes | None, now: datetime
    ) -> bool:
        """A ``held`` delivery becomes ``pending`` with ``body``, due at ``now`` (or
        ``closed`` when ``body`` is ``None``). ``False`` (nothing changed) if it is not held
        or not kept."""
        ...

    async def claim_webhook_deliveries(
        self, now: datetime, *, lease_until: datetime, limit: int
    ) -> list[WebhookDelivery]:
        """Up to ``limit`` ``pending`` deliveries due at or before ``now``, earliest due
        first, each moved in the same commit to be due at ``lease_until`` with one more
        attempt counted (so a worker that dies in the attempt leaves it due again then).
        Two claimers never take the same delivery in one lease: PostgreSQL skips the rows a
        peer has locked. Returns them as claimed (``attempts`` counts this attempt)."""
        ...

    async def finish_webhook_attempt(
        self,
        delivery_id: str,
        *,
        attempt: int,
        status: WebhookStatus,
        next_attempt_at: datetime | None,
        last_status: int | None,
        last_error: str | None,
        now: datetime,
    ) -> bool:
        """Record how attempt number ``attempt`` went: ``delivered`` (``delivered_at`` is
        ``now``), ``failed`` (given up) or ``pending`` again at ``next_attempt_at``. Only while
        the delivery is ``pending`` with that many attempts (an attempt whose lease ran out
        and was claimed again records nothing): ``False`` when nothing changed."""
        ...

    async def list_webhook_deliveries(
        self,
        *,
        status: WebhookStatus | None = None,
        tenant: str | None = None,
        submission_id: str | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[WebhookDelivery]:
        """Up to ``limit`` deliveries (``None`` filters match anything), oldest first (by
        ``created_at``, then id): those after the delivery of id ``after`` (none if it is
        not kept)."""
        ...

    async def get_webhook_delivery(self, delivery_id: str) -> WebhookDelivery | None:
        """The delivery of that id, or ``None``."""
        ...

    async def resend_webhook_delivery(
        self, delivery_id: str, *, now: datetime
    ) -> WebhookDelivery | None:
        """A ``delivered``, ``failed`` or ``pending`` delivery becomes ``pending``, due at
        ``now``, its attempts counted from 0 again (the same id and body: the receiver can
        tell it is the same delivery); a ``held`` or ``closed`` one is left as it is.
        Returns the delivery as it is now, or ``None`` if none has that id."""
        ...

    async def forget_webhook_deliveries(self, key: SessionKey) -> int:
        """Delete every delivery of the session ``key`` (its bodies hold what the session
        said: an erase of the session erases them too); how many."""
        ...
