"""The in-memory store's parts: a conversation's log, a stored submission, the gates index
it can forget from, and the schedules and attachments it keeps."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import orjson

from tether._canonical import canonical_json
from tether._payloads import AttachmentRef
from tether.errors import AttachmentNotFound, DispatchConflict
from tether.records import Record, RecordDraft
from tether.store._common import attachment_ref, record_time, to_micros
from tether.store._gates import GateIndex
from tether.store._sessions import ScheduleRow, TruncatedLog
from tether.store._truncation import check_truncation, seal_anchor
from tether.store._types import Conversation, Submission

__all__ = (
    "AttachmentBook",
    "MemoryGates",
    "MemoryLog",
    "Row",
    "ScheduleBook",
    "StoredSubmission",
    "row_of",
)

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

    @property
    def head_time(self) -> str:
        return record_time(self.rows[-1][2]) if self.rows else ""

    def truncate(self, anchor: RecordDraft) -> TruncatedLog:
        """Replace the rows up to the seq ``anchor`` names by it (see ``Store.truncate_log``)."""
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


class MemoryGates(GateIndex):
    def forget(self, conversation_id: str) -> None:
        """Drop the gates of an erased conversation."""
        self._gates = {k: v for k, v in self._gates.items() if k[0] != conversation_id}


@dataclass
class StoredSubmission:
    submission: Submission  # input/settlement are placeholders; the bytes below are the truth
    input: bytes
    settlement: bytes | None = None


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
                ScheduleRow(schedule.id, {}, schedule.created_at),
                payload,
            )
        elif kept[1] != payload:
            raise DispatchConflict(schedule.id, "the schedules")
        return _fresh(kept)

    def list(self) -> list[ScheduleRow]:
        kept = sorted(self._kept.values(), key=lambda k: (k[0].created_at, k[0].id))
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
