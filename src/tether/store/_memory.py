"""The in-memory store: the reference model of the store contract, the core and every
capability but the two across processes.

It is kept obviously correct rather than fast: plain dicts and lists, every operation
synchronous inside its coroutine (so atomic under asyncio), and every value handed out
freshly decoded so no caller can mutate what is stored. What it keeps: a log per
conversation (:class:`MemoryLog`), the submissions (:class:`StoredSubmission`), the gates
(:class:`~tether.store._gates.GateIndex`), the schedules (:class:`ScheduleBook`), the
attachments (:class:`AttachmentBook`), the workers and the API tokens (plain dicts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from types import TracebackType
from typing import Any, Self

import orjson

from tether._canonical import canonical_json
from tether._payloads import AttachmentRef, ConversationParent
from tether.errors import (
    AttachmentNotFound,
    ClaimLost,
    ConversationNotFound,
    DispatchConflict,
    SeqTruncated,
    SessionExists,
    StoreUnavailable,
    SubagentLimitReached,
    SubmissionNotFound,
    TokenExists,
    TokenNotFound,
    VersionConflict,
)
from tether.records import Actor, Record, RecordDraft
from tether.store._common import (
    attachment_digests,
    attachment_ref,
    check_drafts,
    check_fork_seq,
    check_limit,
    check_session_filter,
    decode_session_cursor,
    encode_session_cursor,
    fork_parent,
    from_micros,
    record_micros,
    record_time,
    seal_append,
    seal_created,
    to_micros,
    verify_anchored,
)
from tether.store._gates import Gate, GateIndex, GateKind, GateStatus
from tether.store._import import ImportCheck
from tether.store._limits import (
    CALL,
    PAUSE,
    SLOT,
    TOKENS,
    TOKENS_WINDOW,
    ClaimSlots,
    GrantTime,
    HeldBack,
    KeyHolds,
    LimitAsk,
    check_ask,
    check_key,
    decide,
    read_now,
)
from tether.store._memory_items import (
    MEMORY_SCAN,
    MemoryHit,
    MemoryItem,
    MemoryWrite,
    Namespace,
    check_memory_key,
    check_memory_page,
    check_namespace,
    check_prefix,
    check_vector,
    keywords,
    memory_write,
    rank_by_vector,
    unpack_vector,
)
from tether.store._metadata import (
    MetadataValue,
    check_metadata_filter,
    merge_metadata,
    metadata_text,
)
from tether.store._notify import AppendNotifier, wait_for_head
from tether.store._protocol import (
    AdmitAndClaimStore,
    AttachmentStore,
    ChildStore,
    ForkStore,
    GateStore,
    ImportStore,
    LimitStore,
    MemoryItemStore,
    RetentionStore,
    ScheduleStore,
    SessionListStore,
    SnapshotStore,
    Store,
    TimerStore,
    TokenStore,
    UsageStore,
    VersionStore,
    WebhookStore,
)
from tether.store._search_text import query_words, searchable, words
from tether.store._sessions import ErasedSession, ScheduleRow, SessionRow, TruncatedLog
from tether.store._tokens import NewToken, TokenRow, check_new_token, stored_time
from tether.store._truncation import check_truncation, seal_anchor
from tether.store._types import WAIT_FOR_CHILDREN as CHILDREN
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
from tether.store._usage import (
    UsageAsk,
    UsageLease,
    UsageRefusal,
    UsageReserved,
    UsageSpent,
    check_usage_ask,
    decide_usage,
    held_by,
    share_of,
    spends_of,
)
from tether.store._versions import (
    VersionCount,
    VersionsServed,
    WorkerRow,
    check_serves,
    check_version,
    count_order,
    frozen_serves,
    served_version,
)
from tether.store._webhooks import WebhookDelivery, WebhookStatus

__all__ = ("MemoryStore",)

Row = tuple[int, str, bytes, str, str]  # seq, kind, canonical, prev_hash, hash


@dataclass
class MemoryLog:
    """One conversation's log as the reference model holds it."""

    conversation: Conversation
    fence: int = 0
    rows: list[Row] = field(default_factory=list)
    snapshot: tuple[int, bytes] | None = None
    head: int = 0
    head_hash: str = ""
    """The anchor (as a conversation row holds it): moved with every append, so ``verify``
    sees a log whose rows were cut short or lengthened behind the store's back."""
    bytes: int = 0
    """The canonical bytes of its records (a fork's copied ones included)."""
    last_activity: int = 0
    """The time of its last record, in microseconds since the epoch."""
    digests: set[str] = field(default_factory=set)
    """The attachments its records reference (a fork's copied ones included)."""
    first: int = 1
    """The seq of ``rows[0]``: 1, or its ``log_truncated`` record's once truncated."""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    """The session's metadata, keys sorted."""
    texts: list[frozenset[str]] = field(default_factory=list)
    """The words of each of its messages that search reads (kept when the log is truncated,
    as the anchor's transcript keeps the messages)."""

    @property
    def head_time(self) -> str:
        return record_time(self.rows[-1][2]) if self.rows else ""

    def truncate(self, anchor: RecordDraft) -> TruncatedLog:
        """Replace the rows up to the seq ``anchor`` names by it (see
        ``RetentionStore.truncate_log``)."""
        cid = self.conversation.id
        through = check_truncation(cid, anchor, head=self.head, first=self.first)
        cut = through - self.first + 1
        sealed = seal_anchor(
            anchor,
            conversation_id=cid,
            session=self.conversation.key.session,
            replaced=Record(*self.rows[cut - 1]),
        )
        before = self.bytes
        self.bytes -= sum(len(row[2]) for row in self.rows[:cut]) - len(sealed.canonical)
        self.rows[:cut] = [row_of(sealed)]
        self.first = through
        if self.snapshot is not None and self.snapshot[0] <= through:
            self.snapshot = None
        return TruncatedLog(cid, cut, through, before, self.bytes)

    @property
    def order_key(self) -> tuple[int, str]:
        """Where it sorts in the sessions index: newest activity first, then by id."""
        return (-self.last_activity, self.conversation.id)


@dataclass
class StoredSubmission:
    submission: Submission  # input/settlement are placeholders; the bytes below are the truth
    input: bytes
    settlement: bytes | None = None
    rank: int = 0
    """Its ``claim_rank``, fixed at admission (``_priority``)."""


class ScheduleBook:
    """Durable schedules by id; the definition's canonical bytes are the truth."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[ScheduleRow, bytes]] = {}

    def put(self, schedule: ScheduleRow) -> ScheduleRow:
        payload = canonical_json(schedule.definition)
        to_micros(schedule.created_at)  # aware, as every time given to a store
        kept = self._kept.get(schedule.id)
        if kept is None:
            kept = self._kept[schedule.id] = (
                ScheduleRow(schedule.id, {}, schedule.created_at, schedule.tenant),
                payload,
            )
        elif kept[1] != payload or kept[0].tenant != schedule.tenant:
            raise DispatchConflict(schedule.id, "the schedules")
        return _fresh(kept)

    def list(self, tenant: str | None = None) -> list[ScheduleRow]:
        kept = sorted(
            (k for k in self._kept.values() if tenant is None or k[0].tenant == tenant),
            key=lambda k: (k[0].created_at, k[0].id),
        )
        return [_fresh(one) for one in kept]

    def delete(self, schedule_id: str) -> bool:
        return self._kept.pop(schedule_id, None) is not None


def _fresh(kept: tuple[ScheduleRow, bytes]) -> ScheduleRow:
    """A fresh copy: no caller can change what is kept."""
    return dataclasses.replace(kept[0], definition=orjson.loads(kept[1]))


def row_of(record: Record) -> Row:
    return (record.seq, record.kind, record.canonical, record.prev_hash, record.hash)


class AttachmentBook:
    """Attachment bytes by digest: content-addressed, so a second put of the same bytes
    keeps the first."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[AttachmentRef, bytes]] = {}

    def put(self, data: bytes, media_type: str) -> AttachmentRef:
        ref = attachment_ref(data, media_type)
        return self._kept.setdefault(ref.digest, (ref, bytes(data)))[0]

    def get(self, digest: str) -> tuple[AttachmentRef, bytes]:
        kept = self._kept.get(digest)
        if kept is None:
            raise AttachmentNotFound(digest)
        return kept

    def discard(self, digest: str) -> bool:
        """Forget ``digest``; whether it was kept."""
        return self._kept.pop(digest, None) is not None


class MemoryStore(
    Store,
    AdmitAndClaimStore,
    AttachmentStore,
    ChildStore,
    ForkStore,
    GateStore,
    ImportStore,
    LimitStore,
    MemoryItemStore,
    RetentionStore,
    ScheduleStore,
    SessionListStore,
    SnapshotStore,
    TimerStore,
    TokenStore,
    UsageStore,
    VersionStore,
    WebhookStore,
):
    """A store held in process memory (``memory://``): the core and every capability but
    ``change_feed`` and ``liveness`` (it lives in one process). Nothing survives the process.

    Example::

        async with MemoryStore() as store:
            conversation, _ = await store.ensure_conversation(key, conversation_id=cid,
                                                              created_at=utc_now())
    """

    url = "memory://"

    def __init__(self) -> None:
        self._logs: dict[str, MemoryLog] = {}
        self._by_key: dict[SessionKey, str] = {}
        self._submissions: dict[str, StoredSubmission] = {}  # insertion order = admission order
        self._dispatch_ids: dict[tuple[SessionKey, str], str] = {}
        self._attempts: dict[str, list[Attempt]] = {}
        self._attachments = AttachmentBook()
        self._references: dict[str, set[str]] = {}  # digest -> the conversations referencing it
        self._schedules = ScheduleBook()
        self._notifier = AppendNotifier()
        self._gates = GateIndex()  # derived from the logs: every append indexes its records
        self._workers: dict[str, WorkerRow] = {}
        self._tokens: dict[str, TokenRow] = {}  # by id; rows are immutable, handed out as kept
        self._token_ids: dict[str, str] = {}  # digest -> id
        self._holds: list[_Hold] = []  # the limits' holds, every key's (few: they expire)
        self._usage: dict[tuple[str, date], UsageSpent] = {}  # by tenant and UTC day
        self._reservations: list[_Reservation] = []  # every tenant's (few: they expire)
        self._memory: dict[tuple[Namespace, str], tuple[MemoryWrite, datetime]] = {}
        self._webhooks: dict[str, WebhookDelivery] = {}  # the outbox, by delivery id
        self._closed = False

    # --- lifecycle --------------------------------------------------------------------

    async def close(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def ping(self) -> None:
        self._check_open()  # memory takes any write while the store is open

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable("the store is closed")

    # --- conversations and logs -------------------------------------------------------

    def _log(self, conversation_id: str) -> MemoryLog:
        self._check_open()
        log = self._logs.get(conversation_id)
        if log is None:
            raise ConversationNotFound(conversation_id)
        return log

    def _create_log(
        self, conversation: Conversation, prefix: Sequence[Record] = (), by: Actor | None = None
    ) -> None:
        self._install(conversation, [*prefix, seal_created(conversation, prefix, by)])

    def _install(self, conversation: Conversation, records: Sequence[Record]) -> MemoryLog:
        log = MemoryLog(conversation, first=records[0].seq)
        self._extend(log, records)
        self._logs[conversation.id] = log
        self._by_key[conversation.key] = conversation.id
        return log

    def _extend(self, log: MemoryLog, records: Sequence[Record]) -> None:
        """Add ``records`` to ``log`` with all that is kept of them: the anchor, the sessions
        index's size and last activity, and the attachments they reference."""
        log.rows.extend(row_of(record) for record in records)
        last = records[-1]
        log.head, log.head_hash = last.seq, last.hash
        log.bytes += sum(len(record.canonical) for record in records)
        log.last_activity = record_micros(last.canonical)
        log.texts += [frozenset(words(text)) for _, text in searchable(records)]
        for digest in attachment_digests(records):
            log.digests.add(digest)
            self._references.setdefault(digest, set()).add(log.conversation.id)

    def _ensure(
        self,
        key: SessionKey,
        conversation_id: str,
        created_at: datetime,
        parent: ConversationParent | None = None,
        tenant: str | None = None,
        by: Actor | None = None,
    ) -> tuple[Conversation, bool]:
        existing = self._by_key.get(key)
        if existing is not None:
            return self._logs[existing].conversation, False
        conversation = Conversation(conversation_id, key, created_at, parent, tenant)
        self._create_log(conversation, by=by)
        self._notifier.notify([conversation.id])
        return conversation, True

    async def ensure_conversation(
        self, key: SessionKey, *, conversation_id: str, created_at: datetime
    ) -> tuple[Conversation, bool]:
        self._check_open()
        return self._ensure(key, conversation_id, created_at)

    async def get_conversation(self, conversation_id: str) -> Conversation:
        return self._log(conversation_id).conversation

    async def find_conversation(self, key: SessionKey) -> Conversation:
        self._check_open()
        conversation_id = self._by_key.get(key)
        if conversation_id is None:
            raise ConversationNotFound(str(key))
        return self._logs[conversation_id].conversation

    async def append(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int,
        fence: int,
        usage_holder: str | None = None,
    ) -> list[Record]:
        check_drafts(drafts)
        log = self._log(conversation_id)
        sealed = seal_append(
            drafts,
            conversation_id=conversation_id,
            expected_seq=expected_seq,
            fence=fence,
            current_fence=log.fence,
            session=log.conversation.key.session,
            head=log.head,
            head_hash=log.head_hash,
            head_time=log.head_time,
        )
        self._extend(log, sealed)
        self._gates.index(log.conversation, sealed)
        tenant = log.conversation.tenant
        if tenant is not None:
            self._spend(tenant, usage_holder or conversation_id, sealed)
        self._notifier.notify([conversation_id])
        return [Record(*row_of(record)) for record in sealed]

    def _spend(self, tenant: str, holder: str, records: Sequence[Record]) -> None:
        """Add what ``records`` spend to their tenant's days, and give back a reservation of
        ``holder`` (the conversation, or the share the append names) for each model call
        they complete (with the append: no await)."""
        for spend in spends_of(records):
            key = (tenant, spend.day)
            kept = self._usage.get(key)
            self._usage[key] = spend.spent if kept is None else kept.plus(spend.spent)
            for _ in range(spend.completions):
                self._release_one(tenant, holder)

    def _release_one(self, tenant: str, holder: str) -> None:
        """Give back the holder's reservation holding least (see :mod:`tether.store._usage`)."""
        mine = [
            (r.tokens, r.cost_usd, index)
            for index, r in enumerate(self._reservations)
            if r.tenant == tenant and r.holder == holder
        ]
        if mine:
            del self._reservations[min(mine)[2]]

    async def append_settled(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int,
        fence: int,
        settle: ClaimSettlement,
        usage_holder: str | None = None,
    ) -> list[Record]:
        stored = self._owned(settle.submission_id, settle.attempt_id, "settle")
        # No await below: the append (which checks before it writes) and the settlement
        # happen together or not at all.
        records = await self.append(
            conversation_id,
            drafts,
            expected_seq=expected_seq,
            fence=fence,
            usage_holder=usage_holder,
        )
        stored.settlement = canonical_json(settle.settlement)
        self._settle(stored, lease_expires_at=None, settled_at=settle.settled_at)
        return records

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
        if settle is None:
            return await self.append(
                conversation_id,
                drafts,
                expected_seq=expected_seq,
                fence=fence,
                usage_holder=usage_holder,
            )
        return await self.append_settled(
            conversation_id,
            drafts,
            expected_seq=expected_seq,
            fence=fence,
            settle=settle,
            usage_holder=usage_holder,
        )

    async def append_decision(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int,
        wake: str | None,
    ) -> list[Record]:
        log = self._log(conversation_id)
        # No await below: the append (which checks before it writes) and the wake-up happen
        # together or not at all.
        records = await self.append(
            conversation_id, drafts, expected_seq=expected_seq, fence=log.fence
        )
        waiting = self._submissions.get(wake) if wake is not None else None
        if waiting is not None:
            self._wake(waiting)
        return records

    async def read(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> list[Record]:
        check_limit(limit)
        log = self._log(conversation_id)
        start = max(after_seq - log.first + 1, 0)  # a truncated log's rows start at its anchor
        return [Record(*row) for row in log.rows[start : start + limit]]

    async def head(self, conversation_id: str) -> int:
        return self._log(conversation_id).head

    async def mint_fence(self, conversation_id: str) -> int:
        log = self._log(conversation_id)
        log.fence += 1
        return log.fence

    async def verify(self, conversation_id: str) -> int:
        log = self._log(conversation_id)
        return verify_anchored(
            conversation_id,
            (Record(*row) for row in log.rows),
            head=log.head,
            head_hash=log.head_hash,
        )

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
        parent = self._log(conversation_id)
        check_fork_seq(conversation_id, at_seq, parent.head)
        if at_seq < parent.first:
            raise SeqTruncated(conversation_id, at_seq, parent.first)
        if key in self._by_key:
            raise SessionExists(str(key))
        conversation = Conversation(
            new_conversation_id,
            key,
            created_at,
            fork_parent(conversation_id, at_seq),
            parent.conversation.tenant,
        )
        copied = parent.rows[: at_seq - parent.first + 1]
        self._create_log(conversation, [Record(*row) for row in copied], by)
        if parent.snapshot is not None and parent.snapshot[0] <= at_seq:
            # A snapshot of the shared records describes the child's first records as well.
            self._logs[new_conversation_id].snapshot = parent.snapshot
        return conversation

    async def put_snapshot(self, conversation_id: str, *, seq: int, body: bytes) -> None:
        log = self._log(conversation_id)
        if seq <= log.first and log.first > 1:
            return  # it describes records retention removed
        if log.snapshot is None or seq > log.snapshot[0]:
            log.snapshot = (seq, bytes(body))

    async def get_snapshot(self, conversation_id: str) -> tuple[int, bytes] | None:
        self._check_open()
        log = self._logs.get(conversation_id)
        return None if log is None else log.snapshot

    async def wait_for_append(self, conversation_id: str, *, after_seq: int) -> int:
        return await wait_for_head(
            self._notifier,
            conversation_id,
            lambda: self.head(conversation_id),
            after_seq=after_seq,
            poll_interval=None,
        )

    # --- submissions ------------------------------------------------------------------

    def _stored(self, submission_id: str) -> StoredSubmission:
        self._check_open()
        stored = self._submissions.get(submission_id)
        if stored is None:
            raise SubmissionNotFound(submission_id)
        return stored

    def _public(self, stored: StoredSubmission) -> Submission:
        return dataclasses.replace(
            stored.submission,
            input=orjson.loads(stored.input),
            settlement=None if stored.settlement is None else orjson.loads(stored.settlement),
        )

    def _update(self, stored: StoredSubmission, **changes: Any) -> Submission:
        stored.submission = dataclasses.replace(stored.submission, **changes)
        return self._public(stored)

    def _owned(self, submission_id: str, attempt_id: str, action: str) -> StoredSubmission:
        stored = self._stored(submission_id)
        submission = stored.submission
        if submission.status is not SubmissionStatus.RUNNING or submission.attempt_id != attempt_id:
            raise ClaimLost(
                submission_id,
                f"cannot {action}: status {submission.status}, attempt {submission.attempt_id}, "
                f"not running under attempt {attempt_id}",
            )
        return stored

    def _started_at(self, submission: Submission, now: datetime) -> datetime:
        """``now``, or when the previous submission of its session settled if that is later:
        the caller read its clock before that settlement may have made this one the head."""
        previous = None
        for other in self._submissions.values():
            if other.submission.id == submission.id:
                break
            if other.submission.conversation_id == submission.conversation_id:
                previous = other.submission.settled_at
        return now if previous is None else max(now, previous)

    def _is_head(self, submission: Submission) -> bool:
        for other in self._submissions.values():
            if other.submission.conversation_id == submission.conversation_id and (
                other.submission.status is not SubmissionStatus.SETTLED
            ):
                return other.submission.id == submission.id
        return False

    def _admitting_tenant(self, new: NewSubmission) -> str | None:
        """The tenant an admission admits for: a child's parent's (when held), else its own;
        ``ConversationNotFound`` if the session exists and is not that tenant's."""
        parent = None if new.parent is None else self._submissions.get(new.parent.submission_id)
        tenant = new.tenant if parent is None else parent.submission.tenant
        existing = self._by_key.get(new.key)
        if (
            tenant is not None
            and existing is not None
            and self._logs[existing].conversation.tenant != tenant
        ):
            raise ConversationNotFound(str(new.key))
        return tenant

    async def admit(self, new: NewSubmission) -> Admission:
        self._check_open()
        payload = canonical_json(new.input)
        rank = new.claim_rank()  # ValueError first
        tenant = self._admitting_tenant(new)  # before a replay: a foreign one is not told
        dispatch_key = (new.key, new.idempotency_key)
        existing_id = self._dispatch_ids.get(dispatch_key)
        if existing_id is not None:
            existing = self._submissions[existing_id]
            if existing.input != payload:
                raise DispatchConflict(new.idempotency_key, str(new.key))
            return Admission(self._public(existing), created=False)
        if new.id in self._submissions:
            raise DispatchConflict(new.id, str(new.key))
        parent = new.parent
        if parent is not None and parent.max_total is not None:
            self._check_tree_total(parent.submission_id, parent.max_total)
        conversation, _ = self._ensure(
            new.key,
            new.conversation_id,
            new.created_at,
            None if parent is None else parent.conversation_parent(),
            tenant,
            new.by,
        )
        submission = Submission(
            id=new.id,
            dispatch_id=new.idempotency_key,
            key=new.key,
            conversation_id=conversation.id,
            status=SubmissionStatus.QUEUED if new.run_at is None else SubmissionStatus.SCHEDULED,
            input={},
            created_at=new.created_at,
            wait_until=new.run_at,
            trace=dict(new.trace) if new.trace else None,
            parent_submission_id=None if parent is None else parent.submission_id,
            parent_call_id=None if parent is None else parent.call_id,
            depth=0 if parent is None else parent.depth,
            tenant=conversation.tenant,
            priority=new.priority,
        )
        stored = StoredSubmission(submission, payload, rank=rank)
        self._submissions[new.id] = stored
        self._dispatch_ids[dispatch_key] = new.id
        return Admission(self._public(stored), created=True)

    def _check_tree_total(self, parent_id: str, limit: int) -> None:
        """``SubagentLimitReached`` if the tree ``parent_id`` belongs to holds ``limit``
        submissions below its root (a parent not held bounds nothing)."""
        root = self._submissions.get(parent_id)
        if root is None:
            return
        while (up := root.submission.parent_submission_id) is not None and up in self._submissions:
            root = self._submissions[up]
        below = {root.submission.id}
        count = 0
        for stored in self._submissions.values():  # admission order: parents before children
            if stored.submission.parent_submission_id in below:
                below.add(stored.submission.id)
                count += 1
        if count >= limit:
            raise SubagentLimitReached(root.submission.id, limit)

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
        if serves is not None:
            check_serves(serves)  # before the admission: bad input leaves the store untouched
        admission = await self.admit(new)  # nothing below awaits anything: one step, a commit
        if slots is not None:
            for key, holder in slots.give_back:  # runs that ended: their slots are free
                self._release_slot(key, holder)
        if admission.submission.status is not SubmissionStatus.QUEUED:
            return admission  # a delayed dispatch (or a replay of one): never claimed here
        if not admission.created or not self._is_head(admission.submission):
            return admission
        if serves is not None and self._served(admission.submission, serves) is None:
            return admission  # an agent this worker does not run: a worker that does claims it
        claiming = dataclasses.replace(admission.submission, attempt_id=attempt_id)
        if slots is not None and not self._take_slots(slots, claiming, now):
            return admission  # its agent or tenant is at its limit: queued, held back
        claimed = await self.claim(
            new.id,
            attempt_id=attempt_id,
            owner_id=owner_id,
            lease_expires_at=lease_expires_at,
            now=now,
            serves=serves,
        )
        return Admission(claimed, created=True)

    async def get_submission(self, submission_id: str) -> Submission:
        return self._public(self._stored(submission_id))

    async def list_submissions(
        self,
        status: SubmissionStatus | None = None,
        *,
        conversation_id: str | None = None,
        unsettled: bool = False,
        tenant: str | None = None,
    ) -> list[Submission]:
        self._check_open()
        return [
            self._public(stored)
            for stored in self._submissions.values()
            if (status is None or stored.submission.status is status)
            and (tenant is None or stored.submission.tenant == tenant)
            and (conversation_id is None or stored.submission.conversation_id == conversation_id)
            and not (unsettled and stored.submission.status is SubmissionStatus.SETTLED)
        ]

    async def list_runnable(self, limit: int = 100) -> list[Submission]:
        check_limit(limit)
        self._check_open()
        return [self._public(stored) for stored in self._runnable(None)[:limit]]

    def _runnable(self, serves: VersionsServed | None) -> list[StoredSubmission]:
        """Each session's head (its oldest unsettled submission) if it is queued, and with
        ``serves``, only if a claim with it may take it: an unservable head is skipped, and
        keeps nothing else from being listed. In claim order: by rank, then admission."""
        heads: dict[str, tuple[int, int, StoredSubmission]] = {}
        for position, stored in enumerate(self._submissions.values()):
            submission = stored.submission
            if submission.status is not SubmissionStatus.SETTLED:
                heads.setdefault(submission.conversation_id, (stored.rank, position, stored))
        return [
            stored
            for _, _, stored in sorted(heads.values(), key=lambda head: head[:2])
            if stored.submission.status is SubmissionStatus.QUEUED
            and (serves is None or self._served(stored.submission, serves) is not None)
        ]

    @staticmethod
    def _served(submission: Submission, serves: VersionsServed) -> str | None:
        return served_version(submission.key.agent, submission.version, serves)

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
        if serves is not None:
            check_serves(serves)
        self._check_open()
        if slots is not None:
            for key, holder in slots.give_back:
                self._release_slot(key, holder)
        runnable = self._runnable(serves)
        if held_back:  # limits: a head whose agent or tenant is at its limit is passed over
            runnable = [
                s
                for s in runnable
                if not held_back.holds(s.submission.key.agent, s.submission.tenant)
            ]
        heads = runnable[: len(attempt_ids)] if attempt_ids else []
        claimed = []
        for head, attempt_id in zip(heads, attempt_ids, strict=False):
            submission = await self.claim(
                head.submission.id,
                attempt_id=attempt_id,
                owner_id=owner_id,
                lease_expires_at=lease_expires_at,
                now=now,
                serves=serves,
            )
            behind = (s.submission for s in self._submissions.values())
            alone = not any(
                s.conversation_id == submission.conversation_id
                for s in behind
                if s.status is SubmissionStatus.QUEUED
            )
            refused = slots is not None and not self._take_slots(slots, submission, now)
            claimed.append(ClaimedHead(submission, alone=alone, slots_refused=refused))
        return claimed

    def _take_slots(self, slots: ClaimSlots, submission: Submission, now: datetime) -> bool:
        """Every slot ``slots`` asks for ``submission`` (nothing runs in between: the claim's
        "transaction"), or none and ``False``."""
        asks = slots.asks(submission)
        for ask in asks:
            check_ask(ask)
        taken: list[tuple[str, str]] = []
        for ask in asks:
            if self._acquire(ask, now) is not None:
                for key, holder in taken:
                    self._release_slot(key, holder)
                return False
            taken.append((ask.key, ask.holder))
        return True

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
        if serves is not None:
            check_serves(serves)
        stored = self._stored(submission_id)
        submission = stored.submission
        if submission.status is not SubmissionStatus.QUEUED:
            raise ClaimLost(submission_id, f"cannot claim: status is {submission.status}")
        if not self._is_head(submission):
            raise ClaimLost(
                submission_id, "cannot claim: an earlier submission of its session is unsettled"
            )
        version = submission.version
        if serves is not None:
            version = self._served(submission, serves)
            if version is None:
                raise ClaimLost(
                    submission_id,
                    f"cannot claim: version {submission.version!r} of agent "
                    f"{submission.key.agent!r} is not served here",
                )
        log = self._logs[submission.conversation_id]
        log.fence += 1
        # ``number`` orders the markers; ``attempt_count`` is the budget (a refund lowers it).
        markers = self._attempts.setdefault(submission_id, [])
        markers.append(
            Attempt(
                attempt_id,
                submission_id,
                owner_id,
                log.fence,
                len(markers) + 1,
                self._started_at(submission, now),
            )
        )
        return self._update(
            stored,
            status=SubmissionStatus.RUNNING,
            attempt_count=submission.attempt_count + 1,
            attempt_id=attempt_id,
            owner_id=owner_id,
            lease_expires_at=lease_expires_at,
            fence=log.fence,
            wait_reason=None,
            version=version,
        )

    async def list_children(self, submission_id: str) -> list[Submission]:
        self._check_open()
        return [
            self._public(stored)
            for stored in self._submissions.values()
            if stored.submission.parent_submission_id == submission_id
        ]

    async def list_expired_waits(self, now: datetime) -> list[Submission]:
        self._check_open()
        return [
            self._public(stored)
            for stored in self._submissions.values()
            if stored.submission.status is SubmissionStatus.WAITING
            and stored.submission.wait_until is not None
            and stored.submission.wait_until <= now
        ]

    async def release_due(self, now: datetime) -> list[Submission]:
        self._check_open()
        due = [
            stored
            for stored in self._submissions.values()
            if stored.submission.status is SubmissionStatus.SCHEDULED
            and stored.submission.wait_until is not None
            and stored.submission.wait_until <= now
        ]
        for stored in due:
            self._update(stored, status=SubmissionStatus.QUEUED)
        return [self._public(stored) for stored in due]

    async def next_due(self) -> datetime | None:
        self._check_open()
        return min(
            (
                stored.submission.wait_until
                for stored in self._submissions.values()
                if stored.submission.wait_until is not None
                and stored.submission.status
                in (SubmissionStatus.SCHEDULED, SubmissionStatus.WAITING)
            ),
            default=None,
        )

    def _has_unsettled_children(self, submission_id: str) -> bool:
        return any(
            stored.submission.parent_submission_id == submission_id
            and stored.submission.status is not SubmissionStatus.SETTLED
            for stored in self._submissions.values()
        )

    def _settle(self, stored: StoredSubmission, **changes: Any) -> Submission:
        """Settle, and wake the parent if this was the last unsettled child it waits for."""
        settled = self._update(stored, status=SubmissionStatus.SETTLED, **changes)
        parent = self._submissions.get(settled.parent_submission_id or "")
        if (
            parent is not None
            and parent.submission.status is SubmissionStatus.WAITING
            and parent.submission.wait_reason == CHILDREN
            and not self._has_unsettled_children(parent.submission.id)
        ):
            self._wake(parent)
        return settled

    async def list_attempts(self, submission_id: str) -> list[Attempt]:
        self._stored(submission_id)
        return list(self._attempts.get(submission_id, ()))

    async def renew_lease(
        self, submission_id: str, *, attempt_id: str, lease_expires_at: datetime
    ) -> Submission:
        stored = self._owned(submission_id, attempt_id, "renew the lease")
        return self._update(stored, lease_expires_at=lease_expires_at)

    async def list_expired_leases(self, now: datetime) -> list[Submission]:
        self._check_open()
        return [
            self._public(stored)
            for stored in self._submissions.values()
            if stored.submission.status is SubmissionStatus.RUNNING
            and stored.submission.lease_expires_at is not None
            and stored.submission.lease_expires_at <= now
        ]

    async def release(
        self,
        submission_id: str,
        *,
        attempt_id: str,
        last_error: str | None = None,
        refund_attempt: bool = False,
    ) -> Submission:
        stored = self._owned(submission_id, attempt_id, "release")
        submission = stored.submission
        return self._update(
            stored,
            status=SubmissionStatus.QUEUED,
            attempt_id=None,
            owner_id=None,
            lease_expires_at=None,
            last_error=last_error if last_error is not None else submission.last_error,
            attempt_count=submission.attempt_count - (1 if refund_attempt else 0),
        )

    async def park(
        self,
        submission_id: str,
        *,
        attempt_id: str,
        reason: str,
        expected_seq: int | None = None,
        wait_until: datetime | None = None,
    ) -> Submission:
        stored = self._owned(submission_id, attempt_id, "park")
        submission = stored.submission
        woken = (
            submission.cancel_requested_at is not None
            or (
                expected_seq is not None
                and self._logs[submission.conversation_id].head != expected_seq
            )
            or (reason == CHILDREN and not self._has_unsettled_children(submission_id))
        )
        return self._update(
            stored,
            status=SubmissionStatus.QUEUED if woken else SubmissionStatus.WAITING,
            attempt_id=None,
            owner_id=None,
            lease_expires_at=None,
            wait_reason=reason,
            wait_until=wait_until,
            attempt_count=submission.attempt_count - 1,
        )

    def _wake(self, stored: StoredSubmission) -> None:
        """Waiting → queued. ``wait_reason`` says what it waited for until its next claim."""
        if stored.submission.status is SubmissionStatus.WAITING:
            self._update(stored, status=SubmissionStatus.QUEUED)

    async def unpark(self, submission_id: str) -> Submission:
        stored = self._stored(submission_id)
        if stored.submission.status is not SubmissionStatus.WAITING:
            raise ClaimLost(submission_id, f"cannot unpark: status is {stored.submission.status}")
        self._wake(stored)
        return self._public(stored)

    async def request_cancel(
        self, submission_id: str, *, now: datetime, by: Actor | None = None
    ) -> Submission:
        stored = self._stored(submission_id)
        submission = stored.submission
        if submission.status is SubmissionStatus.SETTLED:
            return self._public(stored)
        if submission.cancel_requested_at is None:
            self._update(stored, cancel_requested_at=now, cancel_requested_by=by)
        if stored.submission.status is SubmissionStatus.SCHEDULED:  # no need to wait for it
            self._update(stored, status=SubmissionStatus.QUEUED)
        self._wake(stored)  # nothing it waits for will come: its next claim settles it
        return self._public(stored)

    async def reserve_settlement(
        self, submission_id: str, *, attempt_id: str, settlement: Mapping[str, Any]
    ) -> Submission:
        payload = canonical_json(settlement)
        stored = self._owned(submission_id, attempt_id, "reserve the settlement")
        stored.settlement = payload
        return self._update(stored, status=SubmissionStatus.TERMINALIZING, lease_expires_at=None)

    async def settle_absorbed(
        self, submission_id: str, *, settlement: Mapping[str, Any], now: datetime
    ) -> Submission:
        payload = canonical_json(settlement)
        stored = self._stored(submission_id)
        status = stored.submission.status
        if status is SubmissionStatus.SETTLED:
            return self._public(stored)
        if status is not SubmissionStatus.QUEUED:
            raise ClaimLost(submission_id, f"cannot settle as absorbed: status is {status}")
        stored.settlement = payload
        return self._settle(stored, settled_at=now)

    async def finalize_settlement(self, submission_id: str, *, now: datetime) -> Submission:
        stored = self._stored(submission_id)
        status = stored.submission.status
        if status is SubmissionStatus.SETTLED:
            return self._public(stored)
        if status is not SubmissionStatus.TERMINALIZING:
            raise ClaimLost(submission_id, f"cannot finalize: status is {status}")
        return self._settle(stored, settled_at=now)

    # --- approval gates ---------------------------------------------------------------

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
        self._check_open()
        return self._gates.list(status, agent, instance, tool, limit, after, kind, tenant)

    # --- sessions, erasure, import and schedules ---------------------------------------

    def _session_row(self, log: MemoryLog) -> SessionRow:
        conversation = log.conversation
        return SessionRow(
            conversation_id=conversation.id,
            key=conversation.key,
            created_at=conversation.created_at,
            last_activity_at=from_micros(log.last_activity),
            records=log.head,
            bytes=log.bytes,
            parent=conversation.parent,
            cursor=encode_session_cursor(log.last_activity, conversation.id),
            tenant=conversation.tenant,
            metadata=dict(log.metadata),
        )

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
        check_limit(limit)
        check_session_filter(agent, instance)
        wanted = check_metadata_filter(metadata)
        query = frozenset(query_words(text))
        floor = None if since is None else to_micros(since)
        start = None
        if after is not None:
            micros, conversation_id = decode_session_cursor(after)
            start = (-micros, conversation_id)
        self._check_open()
        chosen = sorted(
            (
                log
                for log in self._logs.values()
                if (agent is None or log.conversation.key.agent == agent)
                and (tenant is None or log.conversation.tenant == tenant)
                and (instance is None or log.conversation.key.instance == instance)
                and (start is None or log.order_key > start)
                and (floor is None or log.last_activity >= floor)
                and all(
                    key in log.metadata and metadata_text(log.metadata[key]) == value
                    for key, value in wanted.items()
                )
                and (not query or any(query <= message for message in log.texts))
            ),
            key=lambda log: log.order_key,
        )
        return [self._session_row(log) for log in chosen[:limit]]

    async def patch_session_metadata(
        self, conversation_id: str, patch: Mapping[str, Any]
    ) -> dict[str, MetadataValue]:
        log = self._log(conversation_id)
        log.metadata = merge_metadata(log.metadata, patch)
        return dict(log.metadata)

    async def erase_session(self, conversation_id: str) -> ErasedSession:
        log = self._log(conversation_id)
        key = log.conversation.key
        del self._logs[conversation_id]
        del self._by_key[key]
        erased = [
            stored.submission
            for stored in self._submissions.values()
            if stored.submission.conversation_id == conversation_id
        ]
        for submission in erased:
            del self._submissions[submission.id]
            self._dispatch_ids.pop((submission.key, submission.dispatch_id), None)
            self._attempts.pop(submission.id, None)
        self._gates.forget(conversation_id)
        removed: list[str] = []
        for digest in sorted(log.digests):
            holders = self._references[digest]
            holders.discard(conversation_id)
            if not holders:  # no other conversation's records reference it
                del self._references[digest]
                if self._attachments.discard(digest):
                    removed.append(digest)
        self._notifier.notify([conversation_id])  # a tailer finds it gone
        return ErasedSession(
            conversation_id=conversation_id,
            key=key,
            records=len(log.rows),
            submissions=len(erased),
            snapshot=log.snapshot is not None,
            attachments=tuple(removed),
        )

    async def truncate_log(self, conversation_id: str, anchor: RecordDraft) -> TruncatedLog:
        log = self._log(conversation_id)
        truncated = log.truncate(anchor)
        self._notifier.notify([conversation_id])  # a tailer behind the anchor reads it next
        return truncated

    async def import_conversation(
        self, conversation: Conversation, records: Iterable[Record], *, tenant: str | None = None
    ) -> bool:
        self._check_open()
        conversation = dataclasses.replace(conversation, tenant=tenant)
        check = ImportCheck(conversation)
        records = [check.check(record) for record in records]  # what is checked is what is kept
        check.finish()
        start = check.start
        existing = self._logs.get(conversation.id)
        if (
            existing is not None
            and existing.conversation.key == conversation.key
            and existing.conversation.tenant == tenant
            and (existing.head, existing.head_hash) == (records[-1].seq, records[-1].hash)
        ):
            return False  # this very log is held already
        if existing is not None or conversation.key in self._by_key:
            raise SessionExists(str(conversation.key))
        log = self._install(conversation, records)
        # A fork's copied records are its parent's gates, not its own.
        self._gates.index(log.conversation, [record for record in records if record.seq >= start])
        self._notifier.notify([conversation.id])
        return True

    async def put_schedule(self, schedule: ScheduleRow) -> ScheduleRow:
        self._check_open()
        return self._schedules.put(schedule)

    async def list_schedules(self, *, tenant: str | None = None) -> list[ScheduleRow]:
        self._check_open()
        return self._schedules.list(tenant)

    async def delete_schedule(self, schedule_id: str) -> bool:
        self._check_open()
        return self._schedules.delete(schedule_id)

    # --- webhooks -----------------------------------------------------------------------

    async def put_webhook_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> None:
        self._check_open()
        for delivery in deliveries:
            to_micros(delivery.created_at)  # aware, as every time given to a store
            self._webhooks.setdefault(delivery.id, delivery)

    async def release_webhook_delivery(
        self, delivery_id: str, *, body: bytes | None, now: datetime
    ) -> bool:
        self._check_open()
        kept = self._webhooks.get(delivery_id)
        if kept is None or kept.status is not WebhookStatus.HELD:
            return False
        if body is None:
            self._webhooks[delivery_id] = dataclasses.replace(kept, status=WebhookStatus.CLOSED)
        else:
            self._webhooks[delivery_id] = dataclasses.replace(
                kept, status=WebhookStatus.PENDING, body=bytes(body), next_attempt_at=now
            )
        return True

    async def claim_webhook_deliveries(
        self, now: datetime, *, lease_until: datetime, limit: int
    ) -> list[WebhookDelivery]:
        self._check_open()
        check_limit(limit)
        due = sorted(
            (
                row
                for row in self._webhooks.values()
                if row.status is WebhookStatus.PENDING
                and row.next_attempt_at is not None
                and row.next_attempt_at <= now
            ),
            key=lambda row: (row.next_attempt_at, row.id),
        )[:limit]
        claimed = []
        for row in due:
            taken = dataclasses.replace(row, attempts=row.attempts + 1, next_attempt_at=lease_until)
            self._webhooks[row.id] = taken
            claimed.append(taken)
        return claimed

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
        self._check_open()
        kept = self._webhooks.get(delivery_id)
        if kept is None or kept.status is not WebhookStatus.PENDING or kept.attempts != attempt:
            return False
        self._webhooks[delivery_id] = dataclasses.replace(
            kept,
            status=status,
            next_attempt_at=next_attempt_at if status is WebhookStatus.PENDING else None,
            last_status=last_status,
            last_error=last_error,
            delivered_at=now if status is WebhookStatus.DELIVERED else kept.delivered_at,
        )
        return True

    async def list_webhook_deliveries(
        self,
        *,
        status: WebhookStatus | None = None,
        tenant: str | None = None,
        submission_id: str | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[WebhookDelivery]:
        self._check_open()
        check_limit(limit)
        rows = sorted(self._webhooks.values(), key=lambda row: (row.created_at, row.id))
        if after is not None:
            mark = self._webhooks.get(after)
            if mark is None:
                return []
            rows = [row for row in rows if (row.created_at, row.id) > (mark.created_at, mark.id)]
        return [
            row
            for row in rows
            if (status is None or row.status is status)
            and (tenant is None or row.tenant == tenant)
            and (submission_id is None or row.submission_id == submission_id)
        ][:limit]

    async def get_webhook_delivery(self, delivery_id: str) -> WebhookDelivery | None:
        self._check_open()
        return self._webhooks.get(delivery_id)

    async def resend_webhook_delivery(
        self, delivery_id: str, *, now: datetime
    ) -> WebhookDelivery | None:
        self._check_open()
        kept = self._webhooks.get(delivery_id)
        if kept is None or kept.status in (WebhookStatus.HELD, WebhookStatus.CLOSED):
            return kept
        again = dataclasses.replace(
            kept, status=WebhookStatus.PENDING, attempts=0, next_attempt_at=now
        )
        self._webhooks[delivery_id] = again
        return again

    async def forget_webhook_deliveries(self, key: SessionKey) -> int:
        self._check_open()
        gone = [row.id for row in self._webhooks.values() if row.key == key]
        for delivery_id in gone:
            del self._webhooks[delivery_id]
        return len(gone)

    # --- versions ---------------------------------------------------------------------

    async def set_version(
        self, submission_id: str, *, expected: str | None, version: str
    ) -> Submission:
        check_version(version)
        stored = self._stored(submission_id)
        submission = stored.submission
        movable = submission.status in (SubmissionStatus.QUEUED, SubmissionStatus.WAITING)
        if not movable or submission.version != expected:
            raise VersionConflict(
                submission_id,
                expected=expected,
                actual=submission.version,
                status=submission.status.value,
            )
        return self._update(stored, version=version)

    async def version_counts(self, agent: str | None = None) -> list[VersionCount]:
        self._check_open()
        counted = (
            SubmissionStatus.SCHEDULED,
            SubmissionStatus.QUEUED,
            SubmissionStatus.RUNNING,
            SubmissionStatus.WAITING,
        )
        groups: dict[tuple[str, str | None, str, str | None], int] = {}
        for stored in self._submissions.values():
            s = stored.submission
            if s.status in counted and (agent is None or s.key.agent == agent):
                group = (s.key.agent, s.version, s.status.value, s.wait_reason)
                groups[group] = groups.get(group, 0) + 1
        return sorted(
            (VersionCount(*group, count=count) for group, count in groups.items()),
            key=count_order,
        )

    async def put_worker(self, owner_id: str, serves: VersionsServed, *, now: datetime) -> None:
        check_serves(serves)
        at = from_micros(to_micros(now))  # aware, as every time given to a store; in UTC
        self._check_open()
        kept = self._workers.get(owner_id)
        fresh = frozen_serves(serves)
        since = kept.since if kept is not None and kept.serves == fresh else at
        self._workers[owner_id] = WorkerRow(owner_id, fresh, since)

    async def list_workers(self) -> list[WorkerRow]:
        self._check_open()
        return [
            dataclasses.replace(row, serves=dict(row.serves))
            for _, row in sorted(self._workers.items())
        ]

    async def forget_worker(self, owner_id: str) -> None:
        self._check_open()
        self._workers.pop(owner_id, None)

    # --- limits -----------------------------------------------------------------------

    def _live_holds(self, key: str, now: datetime) -> list[_Hold]:
        self._holds = [h for h in self._holds if h.key != key or h.expires_at > now]
        return [h for h in self._holds if h.key == key]

    async def acquire_limit(self, ask: LimitAsk, *, now: GrantTime) -> datetime | None:
        check_ask(ask)
        self._check_open()
        return self._acquire(ask, now)

    def _acquire(self, ask: LimitAsk, now: GrantTime) -> datetime | None:
        now = read_now(now)  # nothing runs between this and the grant: the key is "locked"
        live = self._live_holds(ask.key, now)

        def of(kind: str) -> list[_Hold]:
            return [h for h in live if h.kind == kind]

        slots, calls, tokens, pauses = of(SLOT), of(CALL), of(TOKENS), of(PAUSE)
        others = [h for h in slots if h.holder != ask.holder]
        holds = KeyHolds(
            slots=len(others),
            first_slot_expiry=min((h.expires_at for h in others), default=None),
            calls=sum(h.amount for h in calls),
            first_call_expiry=min((h.expires_at for h in calls), default=None),
            tokens=sum(h.amount for h in tokens),
            first_tokens_expiry=min((h.expires_at for h in tokens), default=None),
            paused_until=max((h.expires_at for h in pauses), default=None),
            mine=len(others) < len(slots),
        )
        retry_at = decide(ask, holds)
        if retry_at is not None:
            return retry_at
        if ask.concurrency is not None:
            self._holds = [
                h
                for h in self._holds
                if not (h.key == ask.key and h.kind == SLOT and h.holder == ask.holder)
            ]
            self._holds.append(
                _Hold(ask.key, SLOT, ask.holder, ask.owner_id, 1, stored_time(ask.slot_expires_at))
            )
        if ask.rate is not None and ask.per_seconds is not None:
            until = stored_time(now + timedelta(seconds=ask.per_seconds))
            self._holds.append(_Hold(ask.key, CALL, ask.holder, ask.owner_id, ask.calls, until))
        return None

    async def release_limit(self, key: str, *, holder: str, calls: int = 0) -> None:
        self._check_open()
        self._release_slot(key, holder)
        for hold in self._holds:
            if calls > 0 and hold.key == key and hold.kind == CALL and hold.holder == holder:
                given = min(calls, hold.amount)
                hold.amount -= given
                calls -= given
        self._holds = [h for h in self._holds if h.kind != CALL or h.amount > 0]

    def _release_slot(self, key: str, holder: str) -> None:
        self._holds = [
            h for h in self._holds if not (h.key == key and h.kind == SLOT and h.holder == holder)
        ]

    async def renew_limits(self, owner_id: str, *, expires_at: datetime) -> int:
        stored_time(expires_at)
        self._check_open()
        mine = [h for h in self._holds if h.kind == SLOT and h.owner_id == owner_id]
        for hold in mine:
            hold.expires_at = stored_time(expires_at)
        return len(mine)

    async def release_owner_limits(self, owner_id: str) -> int:
        self._check_open()
        kept = [h for h in self._holds if not (h.kind == SLOT and h.owner_id == owner_id)]
        released = len(self._holds) - len(kept)
        self._holds = kept
        return released

    async def spend_limit(self, key: str, *, tokens: int, now: datetime) -> None:
        check_key(key)
        if tokens < 0:
            raise ValueError(f"tokens spent must be 0 or more, not {tokens}")
        stored_time(now)
        self._check_open()
        if tokens:
            until = stored_time(now + timedelta(seconds=TOKENS_WINDOW))
            self._holds.append(_Hold(key, TOKENS, "", "", tokens, until))

    async def pause_limit(self, key: str, *, until: datetime) -> None:
        check_key(key)
        stored_time(until)
        self._check_open()
        self._holds.append(_Hold(key, PAUSE, "", "", 0, stored_time(until)))

    async def limit_slots(self, prefix: str, *, now: datetime) -> dict[str, int]:
        stored_time(now)
        self._check_open()
        counts: dict[str, int] = {}
        for hold in self._holds:
            if hold.kind == SLOT and hold.key.startswith(prefix) and hold.expires_at > now:
                counts[hold.key] = counts.get(hold.key, 0) + 1
        return counts

    # --- usage ------------------------------------------------------------------------

    async def tenant_usage(self, tenant: str, *, start: date, end: date) -> UsageSpent:
        self._check_open()
        total = UsageSpent()
        for (whose, day), spent in self._usage.items():
            if whose == tenant and start <= day < end:
                total = total.plus(spent)
        return total

    async def reserve_usage(self, ask: UsageAsk, *, now: datetime) -> UsageRefusal | None:
        found = await self.lease_usage(ask, now=now)
        return found if isinstance(found, UsageRefusal) else None

    async def lease_usage(self, ask: UsageAsk, *, now: datetime) -> UsageLease | UsageRefusal:
        check_usage_ask(ask)
        now = stored_time(now)
        self._check_open()
        self._reservations = [
            r for r in self._reservations if r.tenant != ask.tenant or r.expires_at > now
        ]
        live = [r for r in self._reservations if r.tenant == ask.tenant]
        reserved = UsageReserved(
            len(live), sum(r.tokens for r in live), sum(r.cost_usd for r in live)
        )
        spents = [
            await self.tenant_usage(ask.tenant, start=limit.start, end=limit.end)
            for limit in ask.limits
        ]
        refused = decide_usage(ask, spents, reserved)
        if refused is not None:
            return refused
        hold = held_by(spents)
        granted = share_of(ask, spents, reserved, hold)
        until = stored_time(ask.expires_at)
        self._reservations.extend(
            _Reservation(ask.tenant, ask.holder, ask.owner_id, *hold, until) for _ in range(granted)
        )
        return UsageLease(granted, *hold)

    async def release_usage(self, tenant: str, *, holder: str, calls: int = 1) -> None:
        self._check_open()
        for _ in range(calls):
            self._release_one(tenant, holder)

    async def renew_usage(self, owner_id: str, *, expires_at: datetime) -> int:
        until = stored_time(expires_at)
        self._check_open()
        mine = [r for r in self._reservations if r.owner_id == owner_id]
        for reservation in mine:
            reservation.expires_at = until
        return len(mine)

    # --- tokens -----------------------------------------------------------------------

    async def put_token(self, new: NewToken) -> TokenRow:
        row = check_new_token(new)
        self._check_open()
        if row.id in self._tokens:
            raise TokenExists(row.id, taken="id")
        if row.digest in self._token_ids:
            raise TokenExists(row.id, taken="digest")
        self._tokens[row.id] = row
        self._token_ids[row.digest] = row.id
        return row

    async def find_token(self, digest: str) -> TokenRow | None:
        self._check_open()
        token_id = self._token_ids.get(digest)
        return None if token_id is None else self._tokens[token_id]

    async def list_tokens(
        self,
        *,
        subject: str | None = None,
        tenant: str | None = None,
        include_revoked: bool = False,
    ) -> list[TokenRow]:
        self._check_open()
        return [
            row
            for _, row in sorted(self._tokens.items())
            if (subject is None or row.subject == subject)
            and (tenant is None or row.tenant == tenant)
            and (include_revoked or row.revoked_at is None)
        ]

    async def revoke_token(self, token_id: str, *, now: datetime) -> TokenRow:
        at = stored_time(now)
        self._check_open()
        row = self._tokens.get(token_id)
        if row is None:
            raise TokenNotFound(token_id)
        if row.revoked_at is None:
            row = self._tokens[token_id] = dataclasses.replace(row, revoked_at=at)
        return row

    # --- memory -----------------------------------------------------------------------

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
        write = memory_write(namespace, key, value, text, embedding, now)
        self._check_open()
        place = (write.namespace, write.key)
        kept = self._memory.get(place)
        created_at = write.now if kept is None else kept[1]
        self._memory[place] = (write, created_at)
        return write.item(created_at)

    async def get_memory(self, namespace: Namespace, key: str) -> MemoryItem | None:
        place = (check_namespace(namespace), check_memory_key(key))
        self._check_open()
        kept = self._memory.get(place)
        return None if kept is None else kept[0].item(kept[1])

    async def delete_memory(self, namespace: Namespace, key: str) -> bool:
        place = (check_namespace(namespace), check_memory_key(key))
        self._check_open()
        return self._memory.pop(place, None) is not None

    def _memory_under(self, prefix: Namespace) -> list[tuple[MemoryWrite, datetime]]:
        """The items under ``prefix``, by namespace then key."""
        return [
            self._memory[place]
            for place in sorted(self._memory)
            if place[0][: len(prefix)] == prefix
        ]

    async def list_memory(
        self, prefix: Namespace, *, limit: int = 100, offset: int = 0
    ) -> list[MemoryItem]:
        labels = check_prefix(prefix)
        check_memory_page(limit, offset)
        self._check_open()
        under = self._memory_under(labels)[offset : offset + limit]
        return [write.item(created_at) for write, created_at in under]

    async def memory_namespaces(
        self, prefix: Namespace, *, limit: int = 100, offset: int = 0
    ) -> list[Namespace]:
        labels = check_prefix(prefix)
        check_memory_page(limit, offset)
        self._check_open()
        held = dict.fromkeys(write.namespace for write, _ in self._memory_under(labels))
        return list(held)[offset : offset + limit]

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
        labels = check_prefix(prefix)
        check_memory_page(limit, offset, scan)
        query = None if vector is None else check_vector(vector)
        wanted = set(keywords(text or ""))
        self._check_open()
        found = [
            (write, created_at)
            for write, created_at in self._memory_under(labels)
            if wanted <= set(write.words.split())
        ]
        # Most recently updated first, then by namespace and key (a stable sort keeps that).
        found.sort(key=lambda kept: kept[0].now, reverse=True)
        if query is None:
            page = found[offset : offset + limit]
            return [MemoryHit(write.item(created_at)) for write, created_at in page]
        candidates = [
            (write.item(created_at), unpack_vector(write.embedding))
            for write, created_at in found
            if write.embedding is not None
        ][:scan]
        return rank_by_vector(candidates, query, limit, offset)

    async def erase_memory(
        self, prefix: Namespace, *, updated_before: datetime | None = None
    ) -> int:
        labels = check_prefix(prefix)
        before = None if updated_before is None else stored_time(updated_before)
        self._check_open()
        doomed = [
            place
            for place, (write, _) in self._memory.items()
            if place[0][: len(labels)] == labels and (before is None or write.now < before)
        ]
        for place in doomed:
            del self._memory[place]
        return len(doomed)

    # --- attachments ------------------------------------------------------------------

    async def put_attachment(self, data: bytes, *, media_type: str) -> AttachmentRef:
        self._check_open()
        return self._attachments.put(data, media_type)

    async def get_attachment(self, digest: str) -> tuple[AttachmentRef, bytes]:
        self._check_open()
        return self._attachments.get(digest)


@dataclass(slots=True)
class _Reservation:
    """One model call in flight of a tenant's, by its conversation (see
    :mod:`tether.store._usage`)."""

    tenant: str
    holder: str
    owner_id: str
    tokens: int
    cost_usd: float
    expires_at: datetime


@dataclass(slots=True)
class _Hold:
    """One hold of a limit key (see :mod:`tether.store._limits`)."""

    key: str
    kind: str
    holder: str
    owner_id: str
    amount: int
    expires_at: datetime
