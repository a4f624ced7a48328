"""An incrementally maintained reading of one conversation's log.

A journal refreshes its view before each operation by reading only the records appended
since, so a long conversation costs O(new records) per turn, not O(log).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime

from tether._gc import collector_paused
from tether.journal import _snapshot
from tether.journal._executions import Execution, Executions, is_fork_marker
from tether.journal._history import Transcript, transcript
from tether.journal._snapshot import (
    Snapshot,
    SnapshotTranscript,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot,
    snapshot_due,
)
from tether.journal._unread import is_unread, unread_prefix
from tether.messages import Message
from tether.records import ConversationCreated, ExecutionStarted, Record, SteerReceived
from tether.store import Conversation, LogStore, SessionKey

__all__ = ("LogView",)

_PAGE = 5000
logger = logging.getLogger("tether.journal")
_UNFIT = "the snapshot of %s does not fit its log: ignored"


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
        self._snapshot_seq = 0  # the seq of the last snapshot this view took in or saved
        self._unrestored: SnapshotTranscript | None = None
        """The transcript of the snapshot taken in, until it is first asked for."""
        self._unread = 0
        """Records 1.._unread stand as placeholders (see :meth:`refresh`, ``lean``)."""

    @property
    def head(self) -> int:
        return len(self.records)

    @property
    def latest(self) -> Execution | None:
        return self.executions.latest

    def add(self, record: Record) -> None:
        records = self.records
        if record.seq != len(records) + 1:
            raise ValueError(f"record {record.seq} does not follow the view's head {self.head}")
        records.append(record)
        self.executions.add(record)
        kind = record.kind
        if kind == SteerReceived.KIND:
            source = record.fields["payload"].get("sourceSubmissionId")
            if source:
                self.steer_sources[str(source)] = str(record.submission_id)
        elif kind == ConversationCreated.KIND:
            self._created = record
            if is_fork_marker(record):
                self.fork_seq = record.seq

    def extend(self, records: Sequence[Record]) -> None:
        """Take in records just appended, if they follow on (else the next refresh reads them)."""
        if records and records[0].seq == self.head + 1:
            for record in records:
                self.add(record)

    async def refresh(
        self, store: LogStore, conversation_id: str, *, lean: bool = False, known_head: int = 0
    ) -> None:
        """Read and take in every record appended since the last refresh.

        ``lean``: what the next execution needs is enough. A new view of a log its caller
        knows to be long (``known_head``) then starts from the log's snapshot and reads only
        the records after it and the latest execution's own; the older records stand as
        placeholders until a refresh that is not lean reads them.
        """
        async with self._lock:
            if self._unread and not lean:
                await self._read_unread(store, conversation_id)
            if (
                lean
                and not self.records
                and known_head >= _snapshot.MIN_RECORDS
                and await self._take_in_lean(store, conversation_id)
            ):
                await self._read_after_head(store, conversation_id)
                return
            page = await store.read(conversation_id, after_seq=self.head, limit=_PAGE)
            # Only a log past MIN_RECORDS is snapshotted (see snapshot_due), so a new view of
            # a shorter one, most views, does not ask the store for a snapshot.
            if not self.records and len(page) >= min(_snapshot.MIN_RECORDS, _PAGE):
                await self._take_in_snapshot(store, conversation_id, page)
            await self._read_after_head(store, conversation_id, page)

    async def _read_after_head(
        self, store: LogStore, conversation_id: str, page: list[Record] | None = None
    ) -> None:
        if page is None:
            page = await store.read(conversation_id, after_seq=self.head, limit=_PAGE)
        while True:
            with collector_paused(len(page)):
                for record in page:
                    if record.seq > self.head:
                        self.add(record)
            if len(page) < _PAGE:  # a short page reached the head as it was read
                break
            page = await store.read(conversation_id, after_seq=self.head, limit=_PAGE)
        created = self._created
        if self.conversation is None and created is not None and created.id == conversation_id:
            self.conversation = _conversation_of(created)

    async def _take_in_lean(self, store: LogStore, conversation_id: str) -> bool:
        """Start from the snapshot, reading only the records the next execution needs: the
        latest execution's, from its start, and the last ``conversation_created``. The
        transcript is restored at once, since the next execution starts from it."""
        snapshot = await store.get_snapshot(conversation_id)
        parsed = None if snapshot is None else parse_snapshot(snapshot[1])
        if parsed is None or snapshot is None or parsed.seq != snapshot[0]:
            return False
        seq, first = parsed.seq, min(parsed.latest_start, parsed.seq - 1)
        read = await _read_range(store, conversation_id, first, seq - first)
        records = unread_prefix(first, parsed.submission_ids())
        if 0 <= parsed.created < first:
            created = await _read_range(store, conversation_id, parsed.created, 1)
            records[parsed.created : parsed.created + 1] = created
        records.extend(read)
        with collector_paused(seq):
            state = parsed.bind(records) if len(records) == seq else None
            if state is None:
                return False
            try:
                transcript, before_latest = state.transcript.restore()
            except ValueError:
                return False
        self._take(records, state)
        self._unrestored = None
        self._transcript, self._before_latest = transcript, before_latest
        self._unread = first
        return True

    async def _read_unread(self, store: LogStore, conversation_id: str) -> None:
        """Read the records a lean refresh left as placeholders, and put them in place."""
        count, self._unread = self._unread, 0
        read = await _read_range(store, conversation_id, 0, count)
        records = self.records
        with collector_paused(len(records)):
            if len(read) == count:
                records[:count] = read
                if self._patch_executions():
                    return
            # The log does not match what its snapshot said of it: take it in from its records.
            logger.info(_UNFIT, conversation_id)
            tail = records[count:]
            self._start_over()
            for record in [*read, *tail]:
                self.add(record)

    def _patch_executions(self) -> bool:
        """Swap the executions' placeholders for the records read; false if a start is not."""
        records = self.records
        for execution in self.executions.by_id.values():
            if is_unread(execution.start):
                execution.start = records[execution.start_index]
                if execution.start.kind != ExecutionStarted.KIND:
                    return False
            execution.inputs = [records[r.seq - 1] for r in execution.inputs]
            execution.effects = [records[r.seq - 1] for r in execution.effects]
            if execution.end is not None:
                execution.end = records[execution.end.seq - 1]
        return True

    def _take(self, records: list[Record], state: Snapshot) -> None:
        self.records = records
        self.executions = state.executions
        self._unrestored = state.transcript
        self._transcribed = len(records)
        self._created = state.created
        self.fork_seq = state.fork_seq
        self.steer_sources = state.steer_sources
        self._snapshot_seq = len(records)

    async def _take_in_snapshot(
        self, store: LogStore, conversation_id: str, first: list[Record]
    ) -> None:
        """Start from the store's snapshot of this log, if it has one this view can use;
        ``first`` is the log's first page, already read."""
        snapshot = await store.get_snapshot(conversation_id)
        if snapshot is None:
            return
        seq, body = snapshot
        records = first[:seq]
        records += await _read_range(store, conversation_id, len(records), seq - len(records))
        with collector_paused(len(records)):
            state = decode_snapshot(records, body) if len(records) == seq else None
            if state is None:
                logger.info(_UNFIT, conversation_id)
                for record in records:
                    self.add(record)
                return
        self._take(records, state)

    async def save_snapshot(self, store: LogStore, conversation_id: str) -> None:
        """Keep a snapshot of this view in the store if the log grew enough since the last
        (see :func:`~tether.journal._snapshot.snapshot_due`). A cache: failing to make or
        keep one is logged, never raised, and not retried before the log grows again."""
        head = self.head
        if not snapshot_due(head, self._snapshot_seq):
            return
        self._snapshot_seq = head
        try:
            body = encode_snapshot(
                self.records,
                self.executions,
                self._transcribed_up(),
                self._created,
                self.fork_seq,
                self.steer_sources,
                self._before_latest,
            )
            await store.put_snapshot(conversation_id, seq=head, body=body)
        except Exception:  # whatever it is, the run it follows has succeeded
            logger.warning("could not keep a snapshot of %s", conversation_id, exc_info=True)

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


async def _read_range(
    store: LogStore, conversation_id: str, after_seq: int, count: int
) -> list[Record]:
    """Up to ``count`` records after ``after_seq``, in pages (fewer only if the log is short)."""
    records: list[Record] = []
    while len(records) < count:
        page = await store.read(
            conversation_id,
            after_seq=after_seq + len(records),
            limit=min(_PAGE, count - len(records)),
        )
        if not page:
            break
        records.extend(page)
    return records


def _conversation_of(created: Record) -> Conversation:
    payload = created.payload
    assert isinstance(payload, ConversationCreated)
    return Conversation(
        created.id,
        SessionKey(payload.agent, payload.instance, payload.session),
        datetime.fromisoformat(created.time),
        payload.parent,
    )
