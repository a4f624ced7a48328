"""An incrementally maintained reading of one conversation's log: the records folded into
executions, the transcript, the steer map.

A journal refreshes its view before each operation by reading only the records appended
since, so a long conversation costs O(new records) per turn, not O(log). A new view of a long
log starts from its snapshot instead of from seq 1 (:mod:`._snapshot_cache`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime

from tether._gc import collector_paused
from tether.errors import RecordDecodeError
from tether.journal._approvals import ApprovalState, open_gate
from tether.journal._executions import Execution, Executions, is_fork_marker
from tether.journal._history import Transcript, transcript
from tether.journal._snapshot import Snapshot, SnapshotTranscript, encode_snapshot
from tether.journal._snapshot_cache import (
    PAGE,
    PROBE,
    UNFIT,
    LeanStart,
    SnapshotCache,
    fill_placeholders,
    read_range,
)
from tether.journal._unread import gap_prefix
from tether.messages import Message
from tether.records import (
    ConversationCreated,
    ExecutionStarted,
    LogTruncated,
    Record,
    SteerReceived,
    decode_record,
)
from tether.store import Conversation, LogStore, SessionKey

__all__ = ("LogView", "steer_source")

logger = logging.getLogger("tether.journal")


class LogView:
    """Kept per conversation and shared by the journals of one process; appends made through
    a journal feed it directly, and ``refresh`` reads whatever other writers added."""

    def __init__(self) -> None:
        self.conversation: Conversation | None = None
        """The conversation (it never changes): read from its own ``conversation_created``
        record by the first refresh, or set by a journal that looked it up."""
        self._lock = asyncio.Lock()
        self._start_over()

    def _start_over(self) -> None:
        """Forget everything taken in (the conversation, which never changes, is kept)."""
        self._created: Record | None = None  # the last conversation_created: a fork's own
        self.records: list[Record] = []
        self.executions = Executions()
        self.fork_seq = 0
        self.steer_sources: dict[str, str] = {}
        """Submission ids of delivered steers -> the submission whose execution took them."""
        self._transcript = Transcript()
        self._transcribed = 0  # records fed to the transcript: it is only built when asked for
        self._before_latest: tuple[int, list[Message]] | None = None
        """The transcript just before the latest execution started, and that start's index:
        what resuming it needs, without transcribing the log a second time."""
        self._snapshots = SnapshotCache()
        self._unrestored: SnapshotTranscript | None = None
        """The transcript of the snapshot taken in, until it is first asked for."""
        self._unread = 0
        """Records 1.._unread stand as placeholders (see :meth:`refresh`, ``lean``)."""
        self.truncated_at = 0
        """The seq of the ``log_truncated`` record retention left, if any: the records before
        it stand as gaps (:data:`~tether.journal._unread.GAP`)."""

    @property
    def head(self) -> int:
        return len(self.records)

    @property
    def latest(self) -> Execution | None:
        return self.executions.latest

    def add(self, record: Record) -> None:
        records = self.records
        kind = record.kind
        if record.seq != len(records) + 1:
            if kind != LogTruncated.KIND or record.seq <= len(records):
                raise ValueError(f"record {record.seq} does not follow the view's head {self.head}")
            self._truncated_before(record.seq)
            records = self.records
        records.append(record)
        self.executions.add(record)
        if kind == LogTruncated.KIND:
            self._take_anchor(record)
        elif kind == SteerReceived.KIND and (steer := steer_source(record)) is not None:
            self.steer_sources[steer[0]] = steer[1]
        elif kind == ConversationCreated.KIND:
            self._created = record
            if is_fork_marker(record):
                self.fork_seq = record.seq

    def _truncated_before(self, seq: int) -> None:
        """Retention removed the records before ``seq`` (and those this view holds of them):
        take the log in from its anchor, with a gap for each record it replaced."""
        if self.records:
            logger.info("the log this view reads was truncated past its head: reading it anew")
            self._start_over()
        self.records = gap_prefix(seq - 1)
        self.executions.count = seq - 1
        self.truncated_at = seq

    def _take_anchor(self, anchor: Record) -> None:
        """What a ``log_truncated`` record carries of the records it replaced (the transcript
        it carries is taken in with the rest: see ``Transcript``)."""
        payload = anchor.payload
        assert isinstance(payload, LogTruncated)
        self.truncated_at = anchor.seq
        self.fork_seq = payload.fork_seq
        self.steer_sources.update(payload.steer_sources)
        if payload.created is not None:
            try:
                self._created = decode_record(payload.created)
            except RecordDecodeError:
                logger.warning("seq %d: log_truncated carries no readable creation", anchor.seq)

    def extend(self, records: Sequence[Record]) -> None:
        """Take in records just appended, if they follow on (else the next refresh reads them)."""
        if records and records[0].seq == self.head + 1:
            for record in records:
                self.add(record)

    async def refresh(
        self,
        store: LogStore,
        conversation_id: str,
        *,
        lean: bool = False,
        known_head: int | None = 0,
    ) -> None:
        """Read and take in every record appended since the last refresh.

        ``lean``: what the next execution needs is enough. A new view of a log its caller
        knows to be long (``known_head``; ``None``: the caller does not know) then starts from
        the log's snapshot and reads only the records after it and the latest execution's
        own; the older records stand as placeholders until a refresh that is not lean reads
        them.
        """
        async with self._lock:
            if self._unread and not lean:
                await self._read_unread(store, conversation_id)
            if lean and not self.records:
                if known_head is None:
                    # Most logs are short: their first records are the whole log, read in the
                    # one round trip a lookup of the head would have cost. A longer one reads
                    # them again below (with its snapshot, if it has one).
                    probe = await store.read(conversation_id, after_seq=0, limit=PROBE)
                    if len(probe) < PROBE:
                        await self._read_after_head(store, conversation_id, probe)
                        return
                    known_head = await store.head(conversation_id)
                lean_start = await self._snapshots.lean_start(store, conversation_id, known_head)
                if lean_start is not None:
                    self._take_lean(lean_start)
                    await self._read_after_head(store, conversation_id)
                    return
            page = await store.read(conversation_id, after_seq=self.head, limit=PAGE)
            if not self.records:
                await self._start_from_snapshot(store, conversation_id, page)
            await self._read_after_head(store, conversation_id, page)

    async def _read_after_head(
        self, store: LogStore, conversation_id: str, page: list[Record] | None = None
    ) -> None:
        if page is None:
            page = await store.read(conversation_id, after_seq=self.head, limit=PAGE)
        while True:
            with collector_paused(len(page)):
                for record in page:
                    if record.seq > self.head:
                        self.add(record)
            if len(page) < PAGE:  # a short page reached the head as it was read
                break
            page = await store.read(conversation_id, after_seq=self.head, limit=PAGE)
        created = self._created
        if self.conversation is None and created is not None and created.id == conversation_id:
            self.conversation = _conversation_of(created)

    def _take_lean(self, start: LeanStart) -> None:
        self._take(start.records, start.state)
        self._unrestored = None
        self._transcript, self._before_latest = start.transcript, start.before_latest
        self._unread = start.unread

    async def _read_unread(self, store: LogStore, conversation_id: str) -> None:
        """Read the records a lean refresh left as placeholders, and put them in place."""
        count, self._unread = self._unread, 0
        read = await read_range(store, conversation_id, 0, count)
        records = self.records
        with collector_paused(len(records)):
            if fill_placeholders(records, self.executions, read, count):
                return
            # The log does not match what its snapshot said of it: take it in from its records.
            logger.info(UNFIT, conversation_id)
            tail = records[count:]
            self._start_over()
            # A log truncated since the lean start reads past the placeholders: from its anchor.
            for record in [*(record for record in read if record.seq <= count), *tail]:
                self.add(record)

    async def _start_from_snapshot(
        self, store: LogStore, conversation_id: str, first: list[Record]
    ) -> None:
        """Start from the store's snapshot of this log, if it has one; ``first`` is the log's
        first page, already read."""
        if first and first[0].seq != 1:  # truncated: its snapshots are not for this view
            return
        started = await self._snapshots.start(store, conversation_id, first)
        if started is None:
            return
        records, state = started
        if state is not None:
            self._take(records, state)
            return
        with collector_paused(len(records)):
            for record in records:
                self.add(record)

    def _take(self, records: list[Record], state: Snapshot) -> None:
        self.records = records
        self.executions = state.executions
        self._unrestored = state.transcript
        self._transcribed = len(records)
        self._created = state.created
        self.fork_seq = state.fork_seq
        self.steer_sources = state.steer_sources

    async def save_snapshot(self, store: LogStore, conversation_id: str) -> None:
        """Keep a snapshot of this view in the store if the log grew enough since the last
        (a cache: a failure is logged, never raised; see :meth:`SnapshotCache.keep`)."""
        if self.truncated_at:  # a truncated log is short: it is read whole (docs/retention.md)
            return
        await self._snapshots.keep(store, conversation_id, self.head, self._snapshot_body)

    def _snapshot_body(self) -> bytes:
        return encode_snapshot(
            self.records,
            self.executions,
            self._transcribed_up(),
            self._created,
            self.fork_seq,
            self.steer_sources,
            self._before_latest,
        )

    def open_gate(self, submission_id: str) -> ApprovalState | None:
        """The approval gate a submission's execution waits on, if it does (see
        :func:`open_gate`)."""
        return open_gate(self.executions.by_submission.get(submission_id, []), self.fork_seq)

    def messages(self) -> list[Message]:
        """The transcript of the whole log."""
        return self._transcribed_up().messages()

    def message_seqs(self) -> list[int]:
        """The seq of the record behind each message of :meth:`messages`."""
        return self._transcribed_up().message_seqs()

    def _restore_transcript(self, unrestored: SnapshotTranscript) -> None:
        self._unrestored = None
        with collector_paused(self._transcribed):
            try:
                self._transcript, self._before_latest = unrestored.restore()
                return
            except ValueError:
                logger.info("a snapshot's transcript does not fit its log: transcribing it")
            self._transcript = Transcript()
            for record in self.records[: self._transcribed]:
                self._transcript.add(record)

    def _transcribed_up(self) -> Transcript:
        if self._unrestored is not None:
            self._restore_transcript(self._unrestored)
        new = range(self._transcribed, len(self.records))
        # Only the latest start is kept: copying the transcript at every start would make
        # transcribing a long log quadratic.
        latest_start = next(
            (i for i in reversed(new) if self.records[i].kind == ExecutionStarted.KIND), None
        )
        with collector_paused(len(new)):
            for index in new:
                if index == latest_start:
                    self._before_latest = (index, self._transcript.messages())
                self._transcript.add(self.records[index])
        self._transcribed = len(self.records)
        return self._transcript

    def history_before(self, execution: Execution) -> list[Message]:
        """The transcript as it stood when ``execution`` started."""
        self._transcribed_up()
        if self._before_latest is not None and self._before_latest[0] == execution.start_index:
            return list(self._before_latest[1])
        with collector_paused(execution.start_index):
            return transcript(self.records[: execution.start_index])


def steer_source(record: Record) -> tuple[str, str] | None:
    """A delivered steer's own submission id and the submission whose execution took it,
    if ``record`` is one."""
    if record.kind != SteerReceived.KIND:
        return None
    source = record.fields["payload"].get("sourceSubmissionId")
    return (str(source), str(record.submission_id)) if source else None


def _conversation_of(created: Record) -> Conversation:
    payload = created.payload
    assert isinstance(payload, ConversationCreated)
    return Conversation(
        created.id,
        SessionKey(payload.agent, payload.instance, payload.session),
        datetime.fromisoformat(created.time),
        payload.parent,
    )
