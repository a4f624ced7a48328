"""A view's use of its log's snapshot: where a new view starts from, and when to keep another.

The snapshot itself (its body, and when a log deserves one) is :mod:`._snapshot`; the view
that folds records is :mod:`._view`. This module reads what a start from a snapshot needs and
hands the view its records and state, never touching the view: a start that does not fit is
``None`` (or the records read, to take in one by one), and the view goes on as without.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from tether._conformance import implements
from tether._gc import collector_paused
from tether.journal import _snapshot
from tether.journal._executions import Executions
from tether.journal._history import Transcript
from tether.journal._snapshot import Snapshot, decode_snapshot, parse_snapshot, snapshot_due
from tether.journal._unread import is_unread, unread_prefix
from tether.messages import Message
from tether.records import ExecutionStarted, Record
from tether.store import LogStore, SnapshotStore

__all__ = (
    "PAGE",
    "PROBE",
    "UNFIT",
    "LeanStart",
    "SnapshotCache",
    "fill_placeholders",
    "read_range",
)

PAGE = 5000
PROBE = 128
"""How many records a new lean view reads before it asks how long the log is."""
"""Records read at once."""
UNFIT = "the snapshot of %s does not fit its log: ignored"
logger = logging.getLogger("tether.journal")


@dataclass(frozen=True, slots=True)
class LeanStart:
    """A view's lean start: records 1..seq, the first ``unread`` of them placeholders, their
    state, and the transcript (restored at once: the next execution starts from it)."""

    records: list[Record]
    state: Snapshot
    unread: int
    transcript: Transcript
    before_latest: tuple[int, list[Message]] | None


def _snapshots(store: LogStore) -> SnapshotStore | None:
    """The store, if it keeps snapshots (asked once per class); without them, a view takes
    a log in record by record."""
    return cast(SnapshotStore, store) if implements(store, SnapshotStore) else None


class SnapshotCache:
    """One view's dealings with its log's snapshot: which one it took in or kept (``seq``),
    reading a start from one, and keeping a new one when due."""

    def __init__(self) -> None:
        self.seq = 0
        """The seq of the last snapshot taken in or kept (or tried: see :meth:`keep`)."""

    async def lean_start(
        self, store: LogStore, conversation_id: str, known_head: int
    ) -> LeanStart | None:
        """Start from the snapshot, reading only the records the next execution needs: the
        latest execution's, from its start, and the last ``conversation_created``; ``None``
        if the log is too short to have a snapshot or it has none this view can use."""
        snapshots = _snapshots(store)
        if known_head < _snapshot.MIN_RECORDS or snapshots is None:
            return None
        snapshot = await snapshots.get_snapshot(conversation_id)
        parsed = None if snapshot is None else parse_snapshot(snapshot[1])
        if parsed is None or snapshot is None or parsed.seq != snapshot[0]:
            return None
        seq, first = parsed.seq, min(parsed.latest_start, parsed.seq - 1)
        read = await read_range(store, conversation_id, first, seq - first)
        if read and read[0].seq != first + 1:
            return None  # truncated by retention past the latest execution's start
        records = unread_prefix(first, parsed.submission_ids())
        if 0 <= parsed.created < first:
            created = await read_range(store, conversation_id, parsed.created, 1)
            if [record.seq for record in created] != [parsed.created + 1]:
                return None  # truncated by retention since: the view reads it whole
            records[parsed.created : parsed.created + 1] = created
        records.extend(read)
        with collector_paused(seq):
            state = parsed.bind(records) if len(records) == seq else None
            if state is None:
                return None
            try:
                transcript, before_latest = state.transcript.restore()
            except ValueError:
                return None
        self.seq = seq
        return LeanStart(records, state, first, transcript, before_latest)

    async def start(
        self, store: LogStore, conversation_id: str, first: list[Record]
    ) -> tuple[list[Record], Snapshot | None] | None:
        """Start from the store's snapshot of this log, ``first`` being the log's first page,
        already read: the records 1..seq and their state, ``None`` in its place if the
        snapshot does not fit them (take them in one by one), or ``None`` if there is none."""
        # Only a log past MIN_RECORDS is snapshotted (see snapshot_due), so a new view of a
        # shorter one, most views, does not ask the store for a snapshot.
        snapshots = _snapshots(store)
        if len(first) < min(_snapshot.MIN_RECORDS, PAGE) or snapshots is None:
            return None
        snapshot = await snapshots.get_snapshot(conversation_id)
        if snapshot is None:
            return None
        seq, body = snapshot
        records = first[:seq]
        records += await read_range(store, conversation_id, len(records), seq - len(records))
        with collector_paused(len(records)):
            state = decode_snapshot(records, body) if len(records) == seq else None
        if state is None:
            logger.info(UNFIT, conversation_id)
        else:
            self.seq = seq
        return records, state

    async def keep(
        self, store: LogStore, conversation_id: str, head: int, body: Callable[[], bytes]
    ) -> None:
        """Keep a snapshot of the log at ``head`` (its ``body``, made only if one is due: see
        :func:`~tether.journal._snapshot.snapshot_due`). A cache: failing to make or keep one
        is logged, never raised, and not retried before the log grows again."""
        snapshots = _snapshots(store)
        if not snapshot_due(head, self.seq) or snapshots is None:
            return
        self.seq = head
        try:
            await snapshots.put_snapshot(conversation_id, seq=head, body=body())
        except Exception:  # whatever it is, the run it follows has succeeded
            logger.warning("could not keep a snapshot of %s", conversation_id, exc_info=True)


def fill_placeholders(
    records: list[Record], executions: Executions, read: list[Record], count: int
) -> bool:
    """Put the ``count`` records a lean start left as placeholders in place (``read``, from
    seq 1), in the log and in the executions; false if they do not fit what the snapshot said
    of them (the log is then to be taken in from its records)."""
    if len(read) != count:
        return False
    records[:count] = read
    for execution in executions.by_id.values():
        if is_unread(execution.start):
            execution.start = records[execution.start_index]
            if execution.start.kind != ExecutionStarted.KIND:
                return False
        execution.inputs = [records[r.seq - 1] for r in execution.inputs]
        execution.effects = [records[r.seq - 1] for r in execution.effects]
        if execution.end is not None:
            execution.end = records[execution.end.seq - 1]
    return True


async def read_range(
    store: LogStore, conversation_id: str, after_seq: int, count: int
) -> list[Record]:
    """Up to ``count`` records after ``after_seq``, in pages (fewer only if the log is short)."""
    records: list[Record] = []
    while len(records) < count:
        page = await store.read(
            conversation_id,
            after_seq=after_seq + len(records),
            limit=min(PAGE, count - len(records)),
        )
        if not page:
            break
        records.extend(page)
    return records
