"""The embedded SQLite store: WAL, one writer thread with group commit, inline readers.

Writes from every conversation are queued to a single writer connection that commits
them together (see :mod:`._sqlite_writer`); readers use a per-thread connection and
run inline, since WAL readers never wait for the writer and a page of records is
cheaper to fetch than to hand to another thread. Several processes may open the same
file: ``BEGIN IMMEDIATE`` serializes their writers and the CAS inside each transaction
keeps the log consistent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from tether._payloads import AttachmentRef
from tether.errors import ConversationNotFound, StoreUnavailable
from tether.records import Actor, Record, RecordDraft
from tether.store import _sqlite_attachments as attachments_sql
from tether.store import _sqlite_children as children_sql
from tether.store import _sqlite_erasure as erasure_sql
from tether.store import _sqlite_import as import_sql
from tether.store import _sqlite_limits as limits_sql
from tether.store import _sqlite_log as log_sql
from tether.store import _sqlite_memory as memory_sql
from tether.store import _sqlite_schedules as schedules_sql
from tether.store import _sqlite_search as search_sql
from tether.store import _sqlite_sessions as sessions_sql
from tether.store import _sqlite_steps as steps_sql
from tether.store import _sqlite_submissions as submission_sql
from tether.store import _sqlite_tokens as tokens_sql
from tether.store import _sqlite_usage as usage_sql
from tether.store import _sqlite_versions as versions_sql
from tether.store import _sqlite_webhooks as webhooks_sql
from tether.store._common import (
    check_drafts,
    check_limit,
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
from tether.store._sqlite_append import AppendRequest
from tether.store._sqlite_gates import list_gates
from tether.store._sqlite_liveness import OwnerLocks
from tether.store._sqlite_schema import Synchronous, connect, migrate, translate_errors
from tether.store._sqlite_truncate import truncate_log
from tether.store._sqlite_writer import SqliteWriter
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
    utc_now,
)
from tether.store._usage import UsageAsk, UsageLease, UsageRefusal, UsageSpent, check_usage_ask
from tether.store._versions import (
    VersionCount,
    VersionsServed,
    WorkerRow,
    check_serves,
    check_version,
)
from tether.store._webhooks import WebhookDelivery, WebhookStatus

__all__ = ("SqliteStore",)

T = TypeVar("T")
logger = logging.getLogger("tether.store")
DEFAULT_FILENAME = "tether.db"
_DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def resolve_path(path: str | Path) -> Path:
    """A directory (existing, or a path without a database suffix) means ``<dir>/tether.db``."""
    path = Path(path)
    if path.is_dir() or (not path.exists() and path.suffix not in _DB_SUFFIXES):
        path.mkdir(parents=True, exist_ok=True)
        return path / DEFAULT_FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class SqliteStore(
    Store,
    AdmitAndClaimStore,
    AttachmentStore,
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
    """A store in one SQLite file (``sqlite:///path``): the core and every capability but
    ``change_feed`` (another process's appends are polled for).

    Example::

        store = await SqliteStore.open("./tether-data")            # ./tether-data/tether.db
        store = await SqliteStore.open("app.db", synchronous="NORMAL")
        store = await SqliteStore.open("agent.db", inline_commits=False)  # fsync off the loop
        async with store:
            ...
    """

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = 5.0,
        poll_interval: float = 0.25,
        inline_commits: bool = True,
    ) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self.synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._poll_interval = poll_interval
        self._notifier = AppendNotifier()
        self._readers = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        with translate_errors("open"):
            conn = connect(path, synchronous=synchronous, busy_timeout=busy_timeout)
            try:
                migrate(conn, busy_timeout)
            except BaseException:
                conn.close()
                raise
        self._writer = SqliteWriter(
            conn,
            self._notifier.notify,
            name=f"tether-sqlite-writer:{path.name}",
            inline=inline_commits,
        )
        self._owners = OwnerLocks(path)
        self._closed = False

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        synchronous: Synchronous = "FULL",
        busy_timeout: float = 5.0,
        poll_interval: float = 0.25,
        inline_commits: bool = True,
    ) -> SqliteStore:
        """Open (creating if needed) the database at ``path``; a directory holds ``tether.db``.

        Writes commit in groups: every write an event loop iteration issues joins one
        transaction. By default (``inline_commits=True``) that transaction commits on the
        loop's own thread when the writer is idle, which spares each commit two thread
        hand-offs (on a virtual machine they can cost more than the fsync) but blocks the loop
        for the fsync; while other callbacks are due on the loop, while another write is
        being committed and while commits average over 2 ms (a slow disk), batches go to
        the writer thread instead, which overlaps the fsync with the loop's work.
        ``inline_commits=False`` always uses the thread.
        Durability is the same either way: nothing returns before its ``COMMIT`` did.
        """
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        return cls(
            resolve_path(path),
            synchronous=synchronous,
            busy_timeout=busy_timeout,
            poll_interval=poll_interval,
            inline_commits=inline_commits,
        )

    @property
    def commits(self) -> int:
        """Write transactions committed by this store so far (group commit makes this < writes)."""
        return self._writer.commits

    # --- lifecycle --------------------------------------------------------------------

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        released = self._owners.release_all()
        with contextlib.suppress(StoreUnavailable):  # what they served goes with them
            for owner_id in released:
                await self._write(versions_sql.delete_worker, owner_id)
        await self._writer.close()
        with self._readers_lock:
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()

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
        await self._write(steps_sql.ping, utc_now())

    # --- owner liveness (OwnerLiveness): lock files beside the database ---------------

    async def hold_liveness(self, owner_id: str) -> None:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        self._owners.hold(owner_id)
        with contextlib.suppress(StoreUnavailable):  # tidying only: the lock is held
            for forgotten in self._owners.sweep(self._has_claims):
                await self._write(versions_sql.delete_worker, forgotten)

    def _has_claims(self, owner_id: str) -> bool:
        return self._read(lambda conn: submission_sql.owner_has_claims(conn, owner_id))

    async def release_liveness(self, owner_id: str) -> None:
        if self._owners.release(owner_id) and not self._closed:
            await self._write(versions_sql.delete_worker, owner_id)

    async def dead_owners(self, owner_ids: Collection[str]) -> set[str]:
        return self._owners.dead(owner_ids)

    async def forget_owner(self, owner_id: str) -> None:
        if self._owners.forget(owner_id):
            await self._write(versions_sql.delete_worker, owner_id)

    # --- plumbing ---------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        conn: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if conn is None:
            with translate_errors("open"):
                conn = connect(
                    self.path, synchronous=self.synchronous, busy_timeout=self._busy_timeout
                )
                conn.execute("PRAGMA query_only=ON")
            self._readers.conn = conn
            with self._readers_lock:
                self._reader_conns.append(conn)
        return conn

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._reader()
        with translate_errors("read"):
            return fn(conn)

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._writer.submit(functools.partial(_call_without_touched, fn, args))

    async def _write_touching(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._writer.submit(lambda conn, touched: fn(conn, *args, touched))

    # --- conversations and logs -------------------------------------------------------

    async def ensure_conversation(
        self, key: SessionKey, *, conversation_id: str, created_at: datetime
    ) -> tuple[Conversation, bool]:
        existing = self._read(lambda conn: log_sql.find_conversation(conn, key))
        if existing is not None:
            return existing, False
        return await self._write_touching(
            log_sql.ensure_conversation, key, conversation_id, created_at
        )

    async def get_conversation(self, conversation_id: str) -> Conversation:
        return self._read(lambda conn: log_sql.get_conversation(conn, conversation_id))

    async def find_conversation(self, key: SessionKey) -> Conversation:
        found = self._read(lambda conn: log_sql.find_conversation(conn, key))
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
        check_drafts(drafts)
        return await self._writer.append(
            AppendRequest(conversation_id, list(drafts), expected_seq, fence, usage_holder)
        )

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
        check_drafts(drafts)
        return await self._write_touching(
            steps_sql.append_settled,
            conversation_id,
            list(drafts),
            expected_seq,
            fence,
            settle,
            usage_holder,
        )

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
        return await self._write_touching(
            steps_sql.append_decision, conversation_id, list(drafts), expected_seq, wake
        )

    async def read(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> list[Record]:
        check_limit(limit)
        return self._read(lambda conn: log_sql.read(conn, conversation_id, after_seq, limit))

    async def head(self, conversation_id: str) -> int:
        return self._read(lambda conn: log_sql.head(conn, conversation_id))

    async def mint_fence(self, conversation_id: str) -> int:
        return await self._write(log_sql.mint_fence, conversation_id)

    async def verify(self, conversation_id: str) -> int:
        def run(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN")  # one snapshot: the anchor and the records it anchors
            try:
                head, head_hash = log_sql.anchor(conn, conversation_id)
                cursor = conn.execute(
                    f"SELECT {log_sql.RECORD_COLUMNS} FROM records WHERE conversation = "
                    "(SELECT number FROM conversations WHERE id = ?) ORDER BY seq",
                    (conversation_id,),
                )
                return verify_anchored(
                    conversation_id, log_sql.chained(cursor), head=head, head_hash=head_hash
                )
            finally:
                conn.execute("COMMIT")

        return self._read(run)

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
        return await self._write_touching(
            log_sql.fork, conversation_id, at_seq, key, new_conversation_id, created_at, by
        )

    async def put_snapshot(self, conversation_id: str, *, seq: int, body: bytes) -> None:
        await self._write(log_sql.put_snapshot, conversation_id, seq, body)

    async def get_snapshot(self, conversation_id: str) -> tuple[int, bytes] | None:
        return self._read(lambda conn: log_sql.get_snapshot(conn, conversation_id))

    async def wait_for_append(self, conversation_id: str, *, after_seq: int) -> int:
        return await wait_for_head(
            self._notifier,
            conversation_id,
            lambda: self.head(conversation_id),
            after_seq=after_seq,
            poll_interval=self._poll_interval,
        )

    # --- submissions ------------------------------------------------------------------

    async def admit(self, new: NewSubmission) -> Admission:
        return await self._write_touching(submission_sql.admit, new)

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
        return await self._writer.submit(
            lambda conn, touched: submission_sql.admit_and_claim(
                conn, new, attempt_id, owner_id, lease_expires_at, now, serves, touched, slots
            )
        )

    async def get_submission(self, submission_id: str) -> Submission:
        return self._read(lambda conn: submission_sql.get_submission(conn, submission_id))

    async def list_submissions(
        self,
        status: SubmissionStatus | None = None,
        *,
        conversation_id: str | None = None,
        unsettled: bool = False,
        tenant: str | None = None,
    ) -> list[Submission]:
        return self._read(
            lambda conn: submission_sql.list_submissions(
                conn, status, conversation_id, unsettled, tenant
            )
        )

    async def list_runnable(self, limit: int = 100) -> list[Submission]:
        check_limit(limit)
        return self._read(lambda conn: submission_sql.list_runnable(conn, limit))

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
        return await self._write(
            submission_sql.claim, submission_id, attempt_id, owner_id, lease_expires_at, now, serves
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
        held = held_back or None
        # Most passes of a claim loop find nothing: a read says so on this thread, without a
        # transaction and two thread hand-offs on the writer. (It is only a hint: what the
        # transaction finds is what is claimed.) It filters as the claim does, so heads only
        # other versions' workers may take cost this one no transaction either.
        claims = bool(attempt_ids) and self._read(
            lambda conn: submission_sql.has_runnable(conn, serves, held)
        )
        if slots is None:
            if not claims:
                return []
            return await self._write(
                submission_sql.claim_runnable,
                attempt_ids,
                owner_id,
                lease_expires_at,
                now,
                serves,
                held,
            )
        if not claims and not slots.give_back:
            return []
        when = stored_time(now)

        def claim(conn: sqlite3.Connection) -> list[ClaimedHead]:
            for key, holder in slots.give_back:  # runs that ended: their slots are free
                limits_sql.release_limit(conn, key, holder)
            if not claims:
                return []
            heads = submission_sql.claim_runnable(
                conn, attempt_ids, owner_id, lease_expires_at, now, serves, held
            )
            return limits_sql.claim_slots(conn, slots, heads, when)

        return await self._write(claim)

    async def list_children(self, submission_id: str) -> list[Submission]:
        return self._read(lambda conn: children_sql.list_children(conn, submission_id))

    async def list_expired_waits(self, now: datetime) -> list[Submission]:
        return self._read(lambda conn: children_sql.list_expired_waits(conn, now))

    async def release_due(self, now: datetime) -> list[Submission]:
        # Looked for first, lock-free: the claim loop asks every second, and on an idle
        # store a write transaction each time would be for nothing.
        if not self._read(lambda conn: submission_sql.any_due(conn, now)):
            return []
        return await self._write(submission_sql.release_due, now)

    async def next_due(self) -> datetime | None:
        return self._read(submission_sql.next_due)

    async def list_attempts(self, submission_id: str) -> list[Attempt]:
        return self._read(lambda conn: submission_sql.list_attempts(conn, submission_id))

    async def renew_lease(
        self, submission_id: str, *, attempt_id: str, lease_expires_at: datetime
    ) -> Submission:
        return await self._write(
            submission_sql.renew_lease, submission_id, attempt_id, lease_expires_at
        )

    async def list_expired_leases(self, now: datetime) -> list[Submission]:
        return self._read(lambda conn: submission_sql.list_expired_leases(conn, now))

    async def release(
        self,
        submission_id: str,
        *,
        attempt_id: str,
        last_error: str | None = None,
        refund_attempt: bool = False,
    ) -> Submission:
        return await self._write(
            submission_sql.release, submission_id, attempt_id, last_error, refund_attempt
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
        return await self._write(
            submission_sql.park, submission_id, attempt_id, reason, expected_seq, wait_until
        )

    async def unpark(self, submission_id: str) -> Submission:
        return await self._write(submission_sql.unpark, submission_id)

    async def request_cancel(
        self, submission_id: str, *, now: datetime, by: Actor | None = None
    ) -> Submission:
        return await self._write(submission_sql.request_cancel, submission_id, now, by)

    async def reserve_settlement(
        self, submission_id: str, *, attempt_id: str, settlement: Mapping[str, Any]
    ) -> Submission:
        return await self._write(
            submission_sql.reserve_settlement, submission_id, attempt_id, dict(settlement)
        )

    async def settle_absorbed(
        self, submission_id: str, *, settlement: Mapping[str, Any], now: datetime
    ) -> Submission:
        return await self._write(
            submission_sql.settle_absorbed, submission_id, dict(settlement), now
        )

    async def finalize_settlement(self, submission_id: str, *, now: datetime) -> Submission:
        return await self._write(submission_sql.finalize_settlement, submission_id, now)

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
        return self._read(
            lambda conn: list_gates(conn, status, agent, instance, tool, limit, after, kind, tenant)
        )

    # --- sessions, erasure, import and schedules ---------------------------------------

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
        floor = None if since is None else to_micros(since)
        if not wanted and not query:
            return self._read(
                lambda conn: sessions_sql.list_sessions(
                    conn, agent, instance, limit, after, tenant, floor
                )
            )
        return self._read(
            lambda conn: search_sql.search_sessions(
                conn,
                agent=agent,
                instance=instance,
                limit=limit,
                after=after,
                tenant=tenant,
                metadata=wanted,
                query=query,
                since=floor,
            )
        )

    async def patch_session_metadata(
        self, conversation_id: str, patch: Mapping[str, Any]
    ) -> dict[str, MetadataValue]:
        return await self._write(search_sql.patch_metadata, conversation_id, patch)

    async def erase_session(self, conversation_id: str) -> ErasedSession:
        erased = await self._write_touching(erasure_sql.erase_session, conversation_id)
        # The erase zeroed what it freed (secure_delete), in new versions of its pages in
        # the WAL; the WAL still holds their earlier versions, and the file older ones.
        await asyncio.to_thread(self._empty_wal)
        return erased

    def _empty_wal(self) -> None:
        """Copy every page of the WAL over the file's and truncate the WAL to nothing,
        waiting up to the busy timeout for other connections' writes and reads. If that
        cannot be done now, the erase stands and its copies go at a later checkpoint."""
        try:
            conn = connect(self.path, synchronous=self.synchronous, busy_timeout=self._busy_timeout)
            try:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                conn.close()
        except sqlite3.Error as exc:
            logger.warning("after an erase, checkpointing %s failed: %s", self.path, exc)
            return
        if busy:
            logger.warning(
                "after an erase, %s was busy past the busy timeout: the WAL keeps earlier "
                "copies of the erased pages until a later checkpoint",
                self.path,
            )

    async def truncate_log(self, conversation_id: str, anchor: RecordDraft) -> TruncatedLog:
        return await self._write_touching(truncate_log, conversation_id, anchor)

    async def import_conversation(
        self, conversation: Conversation, records: Iterable[Record], *, tenant: str | None = None
    ) -> bool:
        # Checked as the writer's transaction takes them in: a log streamed from a file is
        # never held whole, and a record that fails rolls the import back.
        return await self._write_touching(
            functools.partial(import_sql.import_conversation, tenant=tenant), conversation, records
        )

    async def put_schedule(self, schedule: ScheduleRow) -> ScheduleRow:
        return await self._write(schedules_sql.put_schedule, schedule)

    async def list_schedules(self, *, tenant: str | None = None) -> list[ScheduleRow]:
        return self._read(lambda conn: schedules_sql.list_schedules(conn, tenant))

    async def delete_schedule(self, schedule_id: str) -> bool:
        return await self._write(schedules_sql.delete_schedule, schedule_id)

    # --- webhooks ---------------------------------------------------------------------

    async def put_webhook_deliveries(self, deliveries: Sequence[WebhookDelivery]) -> None:
        for delivery in deliveries:
            to_micros(delivery.created_at)  # aware, checked before the writer
        await self._write(webhooks_sql.put_webhook_deliveries, list(deliveries))

    async def release_webhook_delivery(
        self, delivery_id: str, *, body: bytes | None, now: datetime
    ) -> bool:
        return await self._write(webhooks_sql.release_webhook_delivery, delivery_id, body, now)

    async def claim_webhook_deliveries(
        self, now: datetime, *, lease_until: datetime, limit: int
    ) -> list[WebhookDelivery]:
        return await self._write(webhooks_sql.claim_webhook_deliveries, now, lease_until, limit)

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
        return await self._write(
            webhooks_sql.finish_webhook_attempt,
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
        return self._read(
            lambda conn: webhooks_sql.list_webhook_deliveries(
                conn, status, tenant, submission_id, limit, after
            )
        )

    async def get_webhook_delivery(self, delivery_id: str) -> WebhookDelivery | None:
        return self._read(lambda conn: webhooks_sql.get_webhook_delivery(conn, delivery_id))

    async def resend_webhook_delivery(
        self, delivery_id: str, *, now: datetime
    ) -> WebhookDelivery | None:
        return await self._write(webhooks_sql.resend_webhook_delivery, delivery_id, now)

    async def forget_webhook_deliveries(self, key: SessionKey) -> int:
        return await self._write(webhooks_sql.forget_webhook_deliveries, key)

    # --- versions ---------------------------------------------------------------------

    async def set_version(
        self, submission_id: str, *, expected: str | None, version: str
    ) -> Submission:
        check_version(version)
        return await self._write(versions_sql.set_version, submission_id, expected, version)

    async def version_counts(self, agent: str | None = None) -> list[VersionCount]:
        return self._read(lambda conn: versions_sql.version_counts(conn, agent))

    async def put_worker(self, owner_id: str, serves: VersionsServed, *, now: datetime) -> None:
        check_serves(serves)
        to_micros(now)  # aware, as every time given to a store: checked before the write
        await self._write(versions_sql.put_worker, owner_id, serves, now)

    async def list_workers(self) -> list[WorkerRow]:
        return self._read(versions_sql.list_workers)

    async def forget_worker(self, owner_id: str) -> None:
        await self._write(versions_sql.delete_worker, owner_id)

    # --- tokens -----------------------------------------------------------------------

    # --- limits -----------------------------------------------------------------------

    async def acquire_limit(self, ask: LimitAsk, *, now: GrantTime) -> datetime | None:
        check_ask(ask)
        if not callable(now):
            now = read_now(now)  # refused before the write, if naive
        return await self._write(limits_sql.acquire_limit, ask, now)

    async def release_limit(self, key: str, *, holder: str, calls: int = 0) -> None:
        await self._write(limits_sql.release_limit, key, holder, calls)

    async def renew_limits(self, owner_id: str, *, expires_at: datetime) -> int:
        return await self._write(limits_sql.renew_limits, owner_id, stored_time(expires_at))

    async def release_owner_limits(self, owner_id: str) -> int:
        return await self._write(limits_sql.release_owner_limits, owner_id)

    async def spend_limit(self, key: str, *, tokens: int, now: datetime) -> None:
        check_key(key)
        if tokens < 0:
            raise ValueError(f"tokens spent must be 0 or more, not {tokens}")
        if tokens:
            await self._write(limits_sql.spend_limit, key, tokens, stored_time(now))

    async def pause_limit(self, key: str, *, until: datetime) -> None:
        check_key(key)
        await self._write(limits_sql.pause_limit, key, stored_time(until))

    async def limit_slots(self, prefix: str, *, now: datetime) -> dict[str, int]:
        at = stored_time(now)
        return self._read(lambda conn: limits_sql.limit_slots(conn, prefix, at))

    # --- usage ------------------------------------------------------------------------

    async def tenant_usage(self, tenant: str, *, start: date, end: date) -> UsageSpent:
        return self._read(lambda conn: usage_sql.tenant_usage(conn, tenant, start, end))

    async def reserve_usage(self, ask: UsageAsk, *, now: datetime) -> UsageRefusal | None:
        found = await self.lease_usage(ask, now=now)
        return found if isinstance(found, UsageRefusal) else None

    async def lease_usage(self, ask: UsageAsk, *, now: datetime) -> UsageLease | UsageRefusal:
        check_usage_ask(ask)
        return await self._write(usage_sql.lease_usage, ask, stored_time(now))

    async def release_usage(self, tenant: str, *, holder: str, calls: int = 1) -> None:
        await self._write(usage_sql.release_usage, tenant, holder, calls)

    async def renew_usage(self, owner_id: str, *, expires_at: datetime) -> int:
        return await self._write(usage_sql.renew_usage, owner_id, stored_time(expires_at))

    # --- tokens -----------------------------------------------------------------------

    async def put_token(self, new: NewToken) -> TokenRow:
        return await self._write(tokens_sql.put_token, check_new_token(new))

    async def find_token(self, digest: str) -> TokenRow | None:
        return self._read(lambda conn: tokens_sql.find_token(conn, digest))

    async def list_tokens(
        self,
        *,
        subject: str | None = None,
        tenant: str | None = None,
        include_revoked: bool = False,
    ) -> list[TokenRow]:
        return self._read(
            lambda conn: tokens_sql.list_tokens(conn, subject, tenant, include_revoked)
        )

    async def revoke_token(self, token_id: str, *, now: datetime) -> TokenRow:
        return await self._write(tokens_sql.revoke_token, token_id, stored_time(now))

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
        return await self._write(memory_sql.put_memory, write)

    async def get_memory(self, namespace: Namespace, key: str) -> MemoryItem | None:
        labels, key = check_namespace(namespace), check_memory_key(key)
        return self._read(lambda conn: memory_sql.get_memory(conn, labels, key))

    async def delete_memory(self, namespace: Namespace, key: str) -> bool:
        labels, key = check_namespace(namespace), check_memory_key(key)
        return await self._write(memory_sql.delete_memory, labels, key)

    async def list_memory(
        self, prefix: Namespace, *, limit: int = 100, offset: int = 0
    ) -> list[MemoryItem]:
        labels = check_prefix(prefix)
        check_memory_page(limit, offset)
        return self._read(lambda conn: memory_sql.list_memory(conn, labels, limit, offset))

    async def memory_namespaces(
        self, prefix: Namespace, *, limit: int = 100, offset: int = 0
    ) -> list[Namespace]:
        labels = check_prefix(prefix)
        check_memory_page(limit, offset)
        return self._read(lambda conn: memory_sql.memory_namespaces(conn, labels, limit, offset))

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
        return self._read(
            lambda conn: memory_sql.search_memory(conn, labels, text, query, limit, offset, scan)
        )

    async def erase_memory(
        self, prefix: Namespace, *, updated_before: datetime | None = None
    ) -> int:
        before = None if updated_before is None else to_micros(updated_before)
        return await self._write(memory_sql.erase_memory, check_prefix(prefix), before)

    # --- attachments ------------------------------------------------------------------

    async def put_attachment(self, data: bytes, *, media_type: str) -> AttachmentRef:
        return await self._write(attachments_sql.put_attachment, bytes(data), media_type)

    async def get_attachment(self, digest: str) -> tuple[AttachmentRef, bytes]:
        return self._read(lambda conn: attachments_sql.get_attachment(conn, digest))


def _call_without_touched(
    fn: Callable[..., T], args: tuple[Any, ...], conn: sqlite3.Connection, _touched: list[str]
) -> T:
    return fn(conn, *args)
