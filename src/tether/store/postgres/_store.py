"""The PostgreSQL store: psycopg 3, async, a connection pool, LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from datetime import date, datetime
from types import TracebackType
from typing import Any, Self, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from tether._canonical import canonical_json
from tether._payloads import AttachmentRef
from tether._tasks import finish
from tether._urls import redact_url
from tether.errors import ClaimLost, ConversationNotFound, StoreUnavailable, TetherError
from tether.records import Actor, Record, RecordDraft
from tether.store._common import (
    check_drafts,
    check_limit,
    record_time,
    seal_batch,
    to_micros,
    verify_anchored,
)
from tether.store._gates import Gate, GateKind, GateStatus
from tether.store._limits import (
    ClaimSlots,
    GrantTime,
    HeldBack,
    LimitAsk,
    check_ask,
    check_key,
    read_now,
)
from tether.store._memory_items import (
    MEMORY_SCAN,
    MemoryHit,
    MemoryItem,
    Namespace,
    check_memory_key,
    check_memory_page,
    check_namespace,
    check_prefix,
    check_vector,
    memory_write,
)
from tether.store._metadata import MetadataValue, check_metadata_filter
from tether.store._notify import wait_for_head
from tether.store._protocol import (
    AdmitAndClaimStore,
    AttachmentStore,
    ChangeFeed,
    ChildStore,
    ForkStore,
    GateStore,
    ImportStore,
    LimitStore,
    MemoryItemStore,
    OwnerLiveness,
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
from tether.store._search_text import query_words
from tether.store._sessions import ErasedSession, ScheduleRow, SessionRow, TruncatedLog
from tether.store._tokens import NewToken, TokenRow, check_new_token, stored_time
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
    UsageSpent,
    check_usage_ask,
    spends_of,
)
from tether.store._versions import (
    VersionCount,
    VersionsServed,
    WorkerRow,
    check_serves,
    check_version,
)
from tether.store._webhooks import WebhookDelivery, WebhookStatus
from tether.store.postgres import (
    _admission,
    _children,
    _erasure,
    _gates,
    _import,
    _limits,
    _log,
    _memory,
    _schedules,
    _search,
    _sessions,
    _submissions,
    _tokens,
    _truncate,
    _usage,
    _versions,
    _waits,
    _webhooks,
)
from tether.store.postgres._liveness import OwnerSessions
from tether.store.postgres._schema import migrate
from tether.store.postgres._url import split_store_url
from tether.store.postgres._wakeups import Wakeups

__all__ = ("PostgresStore", "split_store_url")

T = TypeVar("T")
_HEADS_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class _Head:
    """What this process last wrote to a conversation (trusted only if still the head)."""

    session: str
    seq: int
    hash: str
    time: str


Conn = psycopg.AsyncConnection[TupleRow]


class PostgresStore(
    Store,
    AdmitAndClaimStore,
    AttachmentStore,
    ChangeFeed,
    ChildStore,
    ForkStore,
    GateStore,
    ImportStore,
    LimitStore,
    MemoryItemStore,
    OwnerLiveness,
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
    """A store in a PostgreSQL database (``postgresql://...``), for many workers: the core
    and every capability.

    Every process opening the same database and schema shares the store: claims take disjoint
    session heads (``FOR UPDATE SKIP LOCKED``), fences reject zombie writers, and
    LISTEN/NOTIFY wakes workers on admission, waiters on settlement and tailers on append in
    any process (polling is only the fallback).

    Example::

        store = await PostgresStore.open("postgresql://tether@db/tether?pool_max=20")
        async with store:
            ...
    """

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "tether",
        pool_min: int = 1,
        pool_max: int = 10,
        poll_interval: float = 1.0,
    ) -> None:
        self.url = redact_url(conninfo)
        """The store's URL without its password, to show (the pool keeps the real one)."""
        self.schema = schema
        self._conninfo = conninfo
        self._poll_interval = poll_interval
        self._channels = _log.Channels(schema)
        self._wake = Wakeups(conninfo, self._channels)
        # Autocommit: a lone statement is its own transaction (one round trip); work that
        # must be atomic opens a transaction explicitly.
        self._pool = AsyncConnectionPool(
            conninfo,
            min_size=pool_min,
            max_size=pool_max,
            open=False,
            configure=self._configure,
            kwargs={"autocommit": True},
            name=f"tether-{schema}",
        )
        self._heads: dict[str, _Head] = {}
        self._tenants: dict[str, str | None] = {}  # by conversation id
        self._owners = OwnerSessions(conninfo, schema, lambda: self._connection(atomic=False))
        self._closed = False

    @classmethod
    async def open(cls, url: str, **options: Any) -> PostgresStore:
        """Open (migrating if needed) the store a ``postgresql://`` URL names. Query options:
        ``schema`` (default ``tether``), ``pool_min``, ``pool_max``, ``poll_interval``; the
        rest of the URL goes to libpq as it is."""
        conninfo, parsed = split_store_url(url)
        settings: dict[str, Any] = {
            "schema": parsed.get("schema", "tether"),
            "pool_min": int(parsed.get("pool_min", 1)),
            "pool_max": int(parsed.get("pool_max", 10)),
            "poll_interval": float(parsed.get("poll_interval", 1.0)),
        }
        settings.update(options)
        store = cls(conninfo, **settings)
        try:
            async with await psycopg.AsyncConnection.connect(conninfo) as conn:
                await migrate(conn, store.schema)
            await store._pool.open(wait=True, timeout=30)
        except psycopg.Error as exc:
            await store.close()
            raise StoreUnavailable(f"postgresql open failed: {redact_url(str(exc))}") from exc
        except BaseException:
            await store.close()
            raise
        return store

    async def _configure(self, conn: Conn) -> None:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        await conn.execute("SET TIME ZONE 'UTC'")
        self._wake.listener.own_backends.add(conn.info.backend_pid)
        # Store transactions last milliseconds and never wait on anything but the database;
        # one left open (a process frozen or cut off mid-transaction) would hold its
        # conversation's lock: the server ends it instead.
        await conn.execute("SET idle_in_transaction_session_timeout = '15s'")

    # --- lifecycle --------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._owners.release_all()
        await self._wake.listener.close()
        await self._pool.close()

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
        async with self._connection(atomic=False) as conn:
            await conn.execute(
                "INSERT INTO heartbeat (at) VALUES (now()) "
                "ON CONFLICT (singleton) DO UPDATE SET at = excluded.at"
            )

    # --- owner liveness (OwnerLiveness): session-level advisory locks ------------------

    async def hold_liveness(self, owner_id: str) -> None:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        await self._owners.hold(owner_id)

    async def release_liveness(self, owner_id: str) -> None:
        await self._owners.release(owner_id)

    async def dead_owners(self, owner_ids: Collection[str]) -> set[str]:
        return await self._owners.dead(owner_ids)

    async def forget_owner(self, owner_id: str) -> None:
        await self._owners.forget(owner_id)

    # --- plumbing ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _connection(self, *, atomic: bool) -> AsyncIterator[Conn]:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        try:
            conn = await self._pool.getconn()
            try:
                if atomic:
                    async with conn.transaction():
                        yield conn
                else:
                    yield conn
            finally:
                # Handed back whole, even by a task being cancelled: cut short, the handover
                # would leave the request it was for waiting on a connection never coming.
                await finish(self._pool.putconn(conn))
        except TetherError:
            raise
        except psycopg.Error as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # psycopg answers a cancelled query with QueryCanceled: the cancellation is
                # what the caller must see, not a store failure it would retry.
                raise asyncio.CancelledError from exc
            raise StoreUnavailable(f"postgresql: {exc}") from exc

    async def _run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``fn`` in a transaction."""
        async with self._connection(atomic=True) as conn:
            return await fn(conn, *args)

    async def _autocommit(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``fn`` without a transaction: reads, and single statements (atomic by themselves)."""
        async with self._connection(atomic=False) as conn:
            return await fn(conn, *args)

    def listen(
        self, topic: str, event: asyncio.Event | None = None
    ) -> contextlib.AbstractContextManager[asyncio.Event]:
        """An event set on each notification for ``topic``, from any process: ``work``
        (something may be runnable), ``settled:<submission id>`` or ``steer:<conversation
        id>`` (a steer or follow-up was admitted). Register, then check, then wait."""
        return self._wake.listen(topic, event)

    # --- conversations and logs -------------------------------------------------------

    async def ensure_conversation(
        self, key: SessionKey, *, conversation_id: str, created_at: datetime
    ) -> tuple[Conversation, bool]:
        return await self._run(
            _log.ensure_conversation, key, conversation_id, created_at, self._channels
        )

    async def get_conversation(self, conversation_id: str) -> Conversation:
        return await self._autocommit(_log.get_conversation, conversation_id)

    async def find_conversation(self, key: SessionKey) -> Conversation:
        found = await self._autocommit(_log.find_conversation, key)
        if found is None:
            raise ConversationNotFound(str(key))
        return found

    async def append(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        *,
        expected_seq: int,
        fence: int,
        usage_holder: str | None = None,
    ) -> list[Record]:
        return await self._append(conversation_id, drafts, expected_seq, fence, None, usage_holder)

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
        return await self._append(
            conversation_id, drafts, expected_seq, fence, settle, usage_holder
        )

    async def _append(
        self,
        conversation_id: str,
        drafts: Sequence[RecordDraft],
        expected_seq: int,
        fence: int,
        settle: ClaimSettlement | None,
        usage_holder: str | None = None,
    ) -> list[Record]:
        check_drafts(drafts)
        known = self._heads.get(conversation_id)
        if known is not None and known.seq == expected_seq:
            # The common case, a writer appending after its own last append: sealed against
            # the head we know, written in one statement if that head is still the head.
            sealed = seal_batch(
                drafts,
                conversation_id=conversation_id,
                session=known.session,
                head=known.seq,
                prev_hash=known.hash,
                prev_time=known.time,
            )
            heard = self._wake.work_heard
            # Records that spend take the checked path (it adds them to their tenant's
            # usage) unless their conversation is of no tenant.
            spends = bool(spends_of(sealed)) and await self._tenant_of(conversation_id) is not None
            written = await self._autocommit(
                _log.append_if_head,
                conversation_id,
                sealed,
                expected_seq,
                fence,
                settle,
                self._channels,
                spends,
            )
            if written is not None:
                # A work notice heard while the statement ran may be an admission into this
                # session that it did not see, and whose claim ran before it committed.
                more_work = written.more_work or self._wake.work_heard != heard
                return self._appended(conversation_id, known.session, sealed, settle, more_work)
        self._heads.pop(conversation_id, None)

        async def checked(conn: Conn) -> tuple[list[Record], str]:
            if settle is not None:  # the claim first (ClaimLost); any error rolls both back
                await _submissions.update_owned(
                    conn,
                    settle.submission_id,
                    settle.attempt_id,
                    "settle",
                    "status = 'settled', lease_expires_at = NULL, settlement = %s, settled_at = %s",
                    (canonical_json(dict(settle.settlement)), settle.settled_at),
                    notify=self._channels.settled,
                    wake=self._channels.work,
                )
            return await _log.append(
                conn,
                conversation_id,
                list(drafts),
                expected_seq,
                fence,
                self._channels,
                usage_holder=usage_holder,
            )

        sealed, session = await self._run(checked)
        return self._appended(conversation_id, session, sealed, settle)

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
        check_drafts(drafts)

        async def decide(conn: Conn) -> tuple[list[Record], str, bool]:
            if wake is not None:
                # The claim's row before the conversation's, as append_settled and park lock
                # them: a park in flight commits wholly before this reads the status, or
                # waits for this commit and then sees the head moved.
                await conn.execute("SELECT 1 FROM submissions WHERE id = %s FOR UPDATE", (wake,))
            row = await (
                await conn.execute(
                    "SELECT fence FROM conversations WHERE id = %s FOR UPDATE", (conversation_id,)
                )
            ).fetchone()
            if row is None:
                raise ConversationNotFound(conversation_id)
            fence = int(row[0])  # a decision is no writer's turn: it supersedes no one
            woken = False
            if wake is not None:
                cursor = await conn.execute(
                    "UPDATE submissions SET status = 'queued' WHERE id = %s AND status = 'waiting'",
                    (wake,),
                )
                woken = cursor.rowcount == 1
                if woken:
                    await _log.notify(conn, self._channels.work, wake)
            sealed, session = await _log.append(
                conn, conversation_id, list(drafts), expected_seq, fence, self._channels
            )
            return sealed, session, woken

        sealed, session, woken = await self._run(decide)
        if woken:
            self._wake.work()  # our own NOTIFY's echo is skipped
        return self._appended(conversation_id, session, sealed, None)

    def _appended(
        self,
        conversation_id: str,
        session: str,
        sealed: list[Record],
        settle: ClaimSettlement | None,
        more_work: bool = True,
    ) -> list[Record]:
        self._remember(conversation_id, session, sealed[-1])
        self._wake.appends.notify([conversation_id])  # local tailers need not wait for the echo
        if settle is not None:  # our own NOTIFY's echo is skipped
            self._wake.settled(settle.submission_id, more_work=more_work)
        return sealed

    async def _tenant_of(self, conversation_id: str) -> str | None:
        """A conversation's tenant (it never changes: kept once asked)."""
        if conversation_id in self._tenants:
            return self._tenants[conversation_id]
        tenant = (await self.get_conversation(conversation_id)).tenant
        if len(self._tenants) >= _HEADS_LIMIT:
            self._tenants.clear()
        self._tenants[conversation_id] = tenant
        return tenant

    def _remember(self, conversation_id: str, session: str, last: Record) -> None:
        if len(self._heads) >= _HEADS_LIMIT:
            self._heads.clear()
        self._heads[conversation_id] = _Head(
            session, last.seq, last.hash, record_time(last.canonical)
        )

    async def read(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> list[Record]:
        check_limit(limit)
        records = await self._autocommit(_log.read, conversation_id, after_seq, limit)
        if records:
            # A writer reads the log before it appends: remember where it ends, so the append
            # can take the one-statement path (it re-checks the head, so a stale entry is safe).
            last = records[-1]
            known = self._heads.get(conversation_id)
            if known is None or known.seq < last.seq:
                self._remember(conversation_id, last.session, last)
        return records

    async def head(self, conversation_id: str) -> int:
        return await self._autocommit(_log.head, conversation_id)

    async def mint_fence(self, conversation_id: str) -> int:
        return await self._autocommit(_log.mint_fence, conversation_id)

    async def put_snapshot(self, conversation_id: str, *, seq: int, body: bytes) -> None:
        await self._run(_truncate.put_snapshot, conversation_id, seq, body)

    async def get_snapshot(self, conversation_id: str) -> tuple[int, bytes] | None:
        return await self._autocommit(_log.get_snapshot, conversation_id)

    async def verify(self, conversation_id: str) -> int:
        records, head, head_hash = await self._autocommit(_log.read_all, conversation_id)
        return verify_anchored(conversation_id, records, head=head, head_hash=head_hash)

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
        return await self._run(
            _log.fork,
            conversation_id,
            at_seq,
            key,
            new_conversation_id,
            created_at,
            self._channels,
            by,
        )

    async def wait_for_append(self, conversation_id: str, *, after_seq: int) -> int:
        return await wait_for_head(
            self._wake.tail(),
            conversation_id,
            lambda: self.head(conversation_id),
            after_seq=after_seq,
            poll_interval=self._poll_interval,
        )

    # --- submissions ------------------------------------------------------------------

    async def admit(self, new: NewSubmission) -> Admission:
        admitted = None
        if new.parent is None or new.parent.max_total is None:  # a bounded tree counts first
            admitted = await self._autocommit(_admission.admit_at_once, new, self._channels)
        if admitted is None:  # a new session, an idempotent replay, or a conflict
            admitted = await self._run(_admission.admit, new, self._channels)
        if admitted.created:
            self._echo_admitted(admitted.submission)
        return admitted

    def _echo_admitted(self, submission: Submission) -> None:
        """What the admission's NOTIFYs tell other processes, told here (an echo of our own
        is skipped)."""
        self._wake.work()
        if _admission.steers(submission.input):
            self._wake.signals.notify([f"steer:{submission.conversation_id}"])

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
            check_serves(serves)
        if slots is not None:
            slots = ClaimSlots(slots.asks, [kh for kh in slots.give_back if _sendable(*kh)])
        admitted = await self._run(
            _admission.admit_and_claim,
            new,
            attempt_id,
            owner_id,
            lease_expires_at,
            now,
            serves,
            self._channels,
            slots,
        )
        if slots is not None and slots.give_back:
            self._wake.work()
        if admitted.created and admitted.submission.attempt_id != attempt_id:
            self._echo_admitted(admitted.submission)  # queued behind another
        return admitted

    async def get_submission(self, submission_id: str) -> Submission:
        return await self._autocommit(_submissions.get_submission, submission_id)

    async def list_submissions(
        self,
        status: SubmissionStatus | None = None,
        *,
        conversation_id: str | None = None,
        unsettled: bool = False,
        tenant: str | None = None,
    ) -> list[Submission]:
        return await self._autocommit(
            _submissions.list_submissions, status, conversation_id, unsettled, tenant
        )

    async def list_runnable(self, limit: int = 100) -> list[Submission]:
        check_limit(limit)
        return await self._autocommit(_submissions.list_runnable, limit)

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
        return await self._autocommit(
            _submissions.claim, submission_id, attempt_id, owner_id, lease_expires_at, now, serves
        )

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
        if slots is not None:
            return await self._claim_with_slots(
                attempt_ids, owner_id, lease_expires_at, now, serves, held_back or None, slots
            )
        if not attempt_ids:
            return []
        return await self._autocommit(
            _submissions.claim_runnable,
            attempt_ids,
            owner_id,
            lease_expires_at,
            now,
            serves,
            held_back or None,
        )

    async def _claim_with_slots(
        self,
        attempt_ids: Sequence[str],
        owner_id: str,
        lease_expires_at: datetime,
        now: datetime,
        serves: VersionsServed | None,
        held: HeldBack | None,
        slots: ClaimSlots,
    ) -> list[ClaimedHead]:
        """The claim and its heads' slots in one transaction (the slots of runs that ended
        given back first)."""
        give_back = [(key, holder) for key, holder in slots.give_back if _sendable(key, holder)]
        if not attempt_ids and not give_back:
            return []

        async def claim(conn: Conn) -> list[ClaimedHead]:
            await _limits.free_slots(conn, give_back, self._channels.work)
            if not attempt_ids:
                return []
            heads = await _submissions.claim_runnable(
                conn, attempt_ids, owner_id, lease_expires_at, now, serves, held
            )
            return await _limits.claim_slots(conn, slots, heads, now)

        claimed = await self._run(claim)
        if give_back:
            self._wake.work()  # this process's claim loops: our own NOTIFY's echo is skipped
        return claimed

    async def list_children(self, submission_id: str) -> list[Submission]:
        return await self._autocommit(_children.list_children, submission_id)

    async def list_expired_waits(self, now: datetime) -> list[Submission]:
        return await self._autocommit(_children.list_expired_waits, now)

    async def release_due(self, now: datetime) -> list[Submission]:
        released = await self._autocommit(
            functools.partial(_waits.release_due, work=self._channels.work, now=now)
        )
        if released:
            self._wake.work()  # our own NOTIFY's echo is skipped
        return released

    async def next_due(self) -> datetime | None:
        return await self._autocommit(_waits.next_due)

    async def list_attempts(self, submission_id: str) -> list[Attempt]:
        return await self._autocommit(_submissions.list_attempts, submission_id)

    async def renew_lease(
        self, submission_id: str, *, attempt_id: str, lease_expires_at: datetime
    ) -> Submission:
        return await self._owned(
            submission_id,
            attempt_id,
            "renew the lease",
            "lease_expires_at = %s",
            (lease_expires_at,),
        )

    async def list_expired_leases(self, now: datetime) -> list[Submission]:
        return await self._autocommit(_submissions.list_expired_leases, now)

    async def release(
        self,
        submission_id: str,
        *,
        attempt_id: str,
        last_error: str | None = None,
        refund_attempt: bool = False,
    ) -> Submission:
        return await self._owned(
            submission_id,
            attempt_id,
            "release",
            "status = 'queued', attempt_id = NULL, owner_id = NULL, lease_expires_at = NULL, "
            "last_error = COALESCE(%s, last_error), attempt_count = attempt_count - %s",
            (last_error, 1 if refund_attempt else 0),
            work=True,
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
        run = functools.partial(
            _waits.park,
            work=self._channels.work,
            submission_id=submission_id,
            attempt_id=attempt_id,
            reason=reason,
            expected_seq=expected_seq,
            wait_until=wait_until,
        )
        parked = await self._run(run)
        if parked.status is SubmissionStatus.QUEUED:
            self._wake.work()  # our own NOTIFY's echo is skipped
        return parked

    async def unpark(self, submission_id: str) -> Submission:
        return await self._owned(
            submission_id,
            None,
            "unpark",
            "status = 'queued'",
            (),
            from_status=SubmissionStatus.WAITING,
            work=True,
        )

    async def request_cancel(
        self, submission_id: str, *, now: datetime, by: Actor | None = None
    ) -> Submission:
        run = functools.partial(
            _waits.request_cancel,
            work=self._channels.work,
            submission_id=submission_id,
            now=now,
            by=by,
        )
        cancelled, requeued = await self._run(run)
        if requeued:
            self._wake.work()  # our own NOTIFY's echo is skipped
        return cancelled

    async def reserve_settlement(
        self, submission_id: str, *, attempt_id: str, settlement: Mapping[str, Any]
    ) -> Submission:
        return await self._owned(
            submission_id,
            attempt_id,
            "reserve the settlement",
            "status = 'terminalizing', lease_expires_at = NULL, settlement = %s",
            (canonical_json(dict(settlement)),),
        )

    async def settle_absorbed(
        self, submission_id: str, *, settlement: Mapping[str, Any], now: datetime
    ) -> Submission:
        return await self._settle(
            submission_id,
            "settle as absorbed",
            "status = 'settled', settlement = %s, settled_at = %s",
            (canonical_json(dict(settlement)), now),
            SubmissionStatus.QUEUED,
        )

    async def finalize_settlement(self, submission_id: str, *, now: datetime) -> Submission:
        return await self._settle(
            submission_id,
            "finalize",
            "status = 'settled', settled_at = %s",
            (now,),
            SubmissionStatus.TERMINALIZING,
        )

    async def _settle(
        self,
        submission_id: str,
        action: str,
        assignments: str,
        params: tuple[Any, ...],
        from_status: SubmissionStatus,
    ) -> Submission:
        try:
            settled = await self._autocommit(
                functools.partial(
                    _submissions.update_owned,
                    submission_id=submission_id,
                    attempt_id=None,
                    action=action,
                    assignments=assignments,
                    params=params,
                    from_status=from_status,
                    notify=self._channels.settled,
                    wake=self._channels.work,
                )
            )
            self._wake.settled(submission_id)  # our own NOTIFY's echo is skipped
            return settled
        except ClaimLost:
            current = await self.get_submission(submission_id)
            if current.status is SubmissionStatus.SETTLED:
                return current  # settled already: idempotent
            raise

    async def _owned(
        self,
        submission_id: str,
        attempt_id: str | None,
        action: str,
        assignments: str,
        params: tuple[Any, ...],
        *,
        from_status: SubmissionStatus = SubmissionStatus.RUNNING,
        work: bool = False,
    ) -> Submission:
        # One statement (the update and its notification), atomic by itself.
        updated = await self._autocommit(
            functools.partial(
                _submissions.update_owned,
                submission_id=submission_id,
                attempt_id=attempt_id,
                action=action,
                assignments=assignments,
                params=params,
                from_status=from_status,
                notify=self._channels.work if work else None,
            )
        )
        if work:
            self._wake.work()  # our own NOTIFY's echo is skipped
        return updated

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
        return await self._autocommit(
            _gates.list_gates, status, agent, instance, tool, limit, after, kind, tenant
        )

    # --- sessions, erasure, import and schedules ------------------------------------------

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
        wanted = check_metadata_filter(metadata)
        query = query_words(text)
        if since is not None:
            to_micros(since)  # aware, as every time given to a store
        if not wanted and not query:
            return await self._autocommit(
                _sessions.list_sessions, agent, instance, limit, after, tenant, since
            )
        return await self._autocommit(
            _search.search_sessions, agent, instance, limit, after, tenant, wanted, query, since
        )

    async def patch_session_metadata(
        self, conversation_id: str, patch: Mapping[str, Any]
    ) -> dict[str, MetadataValue]:
        return await self._run(_search.patch_metadata, conversation_id, patch)

    async def erase_session(self, conversation_id: str) -> ErasedSession:
        erased = await _erasure.erase(self._run, conversation_id, self._channels)
        self._heads.pop(conversation_id, None)
        self._wake.appends.notify([conversation_id])  # its tailers look, and find it gone
        return erased

    async def truncate_log(self, conversation_id: str, anchor: RecordDraft) -> TruncatedLog:
        truncated = await self._run(_truncate.truncate_log, conversation_id, anchor, self._channels)
        # The head and its hash stay, but its record may now be the anchor: the next append
        # seals against what the checked path reads.
        self._heads.pop(conversation_id, None)
        self._wake.appends.notify([conversation_id])  # our own NOTIFY's echo is skipped
        return truncated

    async def import_conversation(
        self, conversation: Conversation, records: Iterable[Record], *, tenant: str | None = None
    ) -> bool:
        return await self._run(
            _import.import_conversation, conversation, records, self._channels, tenant
        )

    async def put_schedule(self, schedule: ScheduleRow) -> ScheduleRow:
        return await self._autocommit(_schedules.put_schedule, schedule)

    async def list_schedules(self, *, tenant: str | None = None) -> list[ScheduleRow]:
        return await self._autocommit(_schedules.list_schedules, tenant)

    async def delete_schedule(self, schedule_id: str) -> bool:
        return await self._autocommit(_schedules.delete_schedule, schedule_id)

    # --- webhooks ---------------------------------------------------------------------

    async def put_webhook_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> None:
        await self._run(_webhooks.put_webhook_deliveries, list(deliveries))

    async def release_webhook_delivery(
        self, delivery_id: str, *, body: bytes | None, now: datetime
    ) -> bool:
        return await self._autocommit(_webhooks.release_webhook_delivery, delivery_id, body, now)

    async def claim_webhook_deliveries(
        self, now: datetime, *, lease_until: datetime, limit: int
    ) -> list[WebhookDelivery]:
        return await self._run(_webhooks.claim_webhook_deliveries, now, lease_until, limit)

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
        return await self._autocommit(
            _webhooks.finish_webhook_attempt,
            delivery_id,
            attempt,
            status,
            next_attempt_at,
            last_status,
            last_error,
            now,
        )

    async def list_webhook_deliveries(
        self,
        *,
        status: WebhookStatus | None = None,
        tenant: str | None = None,
        submission_id: str | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[WebhookDelivery]:
        return await self._autocommit(
            _webhooks.list_webhook_deliveries, status, tenant, submission_id, limit, after
        )

    async def get_webhook_delivery(self, delivery_id: str) -> WebhookDelivery | None:
        return await self._autocommit(_webhooks.get_webhook_delivery, delivery_id)

    async def resend_webhook_delivery(
        self, delivery_id: str, *, now: datetime
    ) -> WebhookDelivery | None:
        return await self._run(_webhooks.resend_webhook_delivery, delivery_id, now)

    async def forget_webhook_deliveries(self, key: SessionKey) -> int:
        return await self._autocommit(_webhooks.forget_webhook_deliveries, key)

    # --- versions ---------------------------------------------------------------------

    async def set_version(
        self, submission_id: str, *, expected: str | None, version: str
    ) -> Submission:
        check_version(version)
        return await self._autocommit(_versions.set_version, submission_id, expected, version)

    async def version_counts(self, agent: str | None = None) -> list[VersionCount]:
        return await self._autocommit(_versions.version_counts, agent)

    async def put_worker(self, owner_id: str, serves: VersionsServed, *, now: datetime) -> None:
        check_serves(serves)
        to_micros(now)  # aware, as every time given to a store
        await self._autocommit(_versions.put_worker, owner_id, serves, now)

    async def list_workers(self) -> list[WorkerRow]:
        return await self._autocommit(_versions.list_workers)

    async def forget_worker(self, owner_id: str) -> None:
        await self._autocommit(_versions.delete_worker, owner_id)

    # --- limits -----------------------------------------------------------------------

    async def acquire_limit(self, ask: LimitAsk, *, now: GrantTime) -> datetime | None:
        check_ask(ask)
        if not callable(now):
            now = read_now(now)  # refused before the transaction, if naive
        return await self._run(_limits.acquire_limit, ask, now)

    async def release_limit(self, key: str, *, holder: str, calls: int = 0) -> None:
        if not _sendable(key, holder):
            return
        if calls:  # a lease's unspent calls: no claim waits for them
            await self._autocommit(_limits.release_limit, key, holder, calls)
        else:
            await self._run(_limits.free_slots, [(key, holder)], self._channels.work)
            self._wake.work()

    async def renew_limits(self, owner_id: str, *, expires_at: datetime) -> int:
        expires_at = stored_time(expires_at)
        if not _sendable(owner_id):
            return 0
        return await self._autocommit(_limits.renew_limits, owner_id, expires_at)

    async def release_owner_limits(self, owner_id: str) -> int:
        if not _sendable(owner_id):
            return 0

        async def release(conn: Conn) -> int:
            count = await _limits.release_owner_limits(conn, owner_id)
            if count:  # a dead worker's slots: a head held back for them may be claimed
                await _log.notify(conn, self._channels.work, "slots")
            return count

        count = await self._run(release)
        if count:
            self._wake.work()
        return count

    async def spend_limit(self, key: str, *, tokens: int, now: datetime) -> None:
        check_key(key)
        if tokens < 0:
            raise ValueError(f"tokens spent must be 0 or more, not {tokens}")
        if tokens:
            await self._autocommit(_limits.spend_limit, key, tokens, stored_time(now))

    async def pause_limit(self, key: str, *, until: datetime) -> None:
        check_key(key)
        await self._autocommit(_limits.pause_limit, key, stored_time(until))

    async def limit_slots(self, prefix: str, *, now: datetime) -> dict[str, int]:
        now = stored_time(now)
        if not _sendable(prefix):
            return {}
        return await self._autocommit(_limits.limit_slots, prefix, now)

    # --- usage ------------------------------------------------------------------------

    async def tenant_usage(self, tenant: str, *, start: date, end: date) -> UsageSpent:
        return await self._autocommit(_usage.tenant_usage, tenant, start, end)

    async def reserve_usage(self, ask: UsageAsk, *, now: datetime) -> UsageRefusal | None:
        found = await self.lease_usage(ask, now=now)
        return found if isinstance(found, UsageRefusal) else None

    async def lease_usage(self, ask: UsageAsk, *, now: datetime) -> UsageLease | UsageRefusal:
        check_usage_ask(ask)
        return await self._run(_usage.lease_usage, ask, stored_time(now))

    async def release_usage(self, tenant: str, *, holder: str, calls: int = 1) -> None:
        await self._autocommit(_usage.release_usage, tenant, holder, calls)

    async def renew_usage(self, owner_id: str, *, expires_at: datetime) -> int:
        return await self._autocommit(_usage.renew_usage, owner_id, stored_time(expires_at))

    # --- tokens -----------------------------------------------------------------------

    async def put_token(self, new: NewToken) -> TokenRow:
        return await self._autocommit(_tokens.put_token, check_new_token(new))

    async def find_token(self, digest: str) -> TokenRow | None:
        return await self._autocommit(_tokens.find_token, digest)

    async def list_tokens(
        self,
        *,
        subject: str | None = None,
        tenant: str | None = None,
        include_revoked: bool = False,
    ) -> list[TokenRow]:
        return await self._autocommit(_tokens.list_tokens, subject, tenant, include_revoked)

    async def revoke_token(self, token_id: str, *, now: datetime) -> TokenRow:
        return await self._autocommit(_tokens.revoke_token, token_id, stored_time(now))

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
        return await self._autocommit(_memory.put_memory, write)

    async def get_memory(self, namespace: Namespace, key: str) -> MemoryItem | None:
        labels, key = check_namespace(namespace), check_memory_key(key)
        return await self._autocommit(_memory.get_memory, labels, key)

    async def delete_memory(self, namespace: Namespace, key: str) -> bool:
        labels, key = check_namespace(namespace), check_memory_key(key)
        return await self._autocommit(_memory.delete_memory, labels, key)

    async def list_memory(
        self, prefix: Namespace, *, limit: int = 100, offset: int = 0
    ) -> list[MemoryItem]:
        labels = check_prefix(prefix)
        check_memory_page(limit, offset)
        return await self._autocommit(_memory.list_memory, labels, limit, offset)

    async def memory_namespaces(
        self, prefix: Namespace, *, limit: int = 100, offset: int = 0
    ) -> list[Namespace]:
        labels = check_prefix(prefix)
        check_memory_page(limit, offset)
        return await self._autocommit(_memory.memory_namespaces, labels, limit, offset)

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
        return await self._autocommit(
            _memory.search_memory, labels, text, query, limit, offset, scan
        )

    async def erase_memory(
        self, prefix: Namespace, *, updated_before: datetime | None = None
    ) -> int:
        before = None if updated_before is None else stored_time(updated_before)
        return await self._autocommit(_memory.erase_memory, check_prefix(prefix), before)

    # --- attachments ------------------------------------------------------------------

    async def put_attachment(self, data: bytes, *, media_type: str) -> AttachmentRef:
        return await self._run(_submissions.put_attachment, bytes(data), media_type)

    async def get_attachment(self, digest: str) -> tuple[AttachmentRef, bytes]:
        return await self._autocommit(_submissions.get_attachment, digest)


def _sendable(*texts: str) -> bool:
    """Whether libpq can send these (no NUL): a text with one matches no stored row."""
    return not any("\x00" in text for text in texts)
