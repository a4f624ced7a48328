"""Where retention may cut a log's head, and the ``log_truncated`` record that replaces it.

A cut through seq K removes records 1..K for good, so it may only fall where nothing after K
still needs them: every submission with a record at or before K has settled by K (its
``submission_settled`` record) and has no record after it (for a log a journal wrote without
the engine, every execution has ended). Records a fork copied from its
parent (those up to the fork marker) are the parent's and inert here, whatever their state.
What the removed records gave a reader (the transcript, the last ``conversation_created``,
the fork marker's seq, the delivered steers, the usage) is carried by the anchor.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.journal._executions import is_fork_marker
from tether.journal._history import Transcript
from tether.journal._unread import is_gap
from tether.journal._view import steer_source
from tether.messages import Usage
from tether.records import (
    ConversationCreated,
    ExecutionEnded,
    LogTruncated,
    Record,
    RecordDraft,
    SubmissionSettled,
    now_rfc3339,
)

__all__ = ("truncation_anchor", "truncation_point")


def truncation_point(records: Sequence[Record], *, keep: int, fork_seq: int = 0) -> int:
    """The latest seq a log's head may be cut through keeping at least ``keep`` records after
    it (0 if there is none past the log's current anchor). ``records`` is the whole log as a
    full view holds it (from seq 1, gaps before an anchor)."""
    head = len(records)
    first = next((index for index, record in enumerate(records) if not is_gap(record)), head)
    limit = head - max(keep, 0)
    if limit <= first + 1:  # nothing past the current anchor (at index ``first``)
        return 0
    # What must stay whole: a submission until it settles; an execution a journal ran
    # without one (no engine) until it ends. Each: [first seq, last seq, done (0/1)].
    spans: dict[tuple[bool, str], list[int]] = {}
    for record in records[first:]:
        owner = record.submission_id
        key = (True, owner) if owner is not None else (False, record.execution_id or "")
        if not key[1]:
            continue
        span = spans.get(key)
        if span is None:
            span = spans[key] = [record.seq, record.seq, 0]
        span[1] = record.seq
        if record.kind == (SubmissionSettled.KIND if key[0] else ExecutionEnded.KIND):
            span[2] = 1
    blocked = [0] * (head + 2)  # a difference array of the seqs a cut may not fall on
    for start, last, settled in spans.values():
        end = last if settled or last <= fork_seq else head + 1
        if start < end:  # a cut through start..end-1 would split this submission's records
            blocked[start] += 1
            blocked[end] -= 1
    open_spans = 0
    allowed = 0
    for seq in range(1, limit + 1):
        open_spans += blocked[seq]
        if open_spans == 0 and seq > first + 1:
            allowed = seq
    return allowed


def truncation_anchor(
    records: Sequence[Record],
    through: int,
    *,
    usage: Usage | None,
    model_calls: int,
    cost: float | None,
) -> RecordDraft:
    """The ``log_truncated`` record that replaces ``records`` 1..``through`` (a cut
    :func:`truncation_point` allowed), carrying what they leave a reader; ``usage``,
    ``model_calls`` and ``cost`` total the model calls among them (the engine's to count)."""
    replaced = records[through - 1]
    if is_gap(replaced) or replaced.kind == LogTruncated.KIND:
        raise ValueError(f"seq {through} was truncated already")
    transcript = Transcript()
    created: Record | None = None
    fork_seq = 0
    steers: dict[str, str] = {}
    carried_created = None
    for record in records[:through]:
        transcript.add(record)
        kind = record.kind
        if kind == LogTruncated.KIND:
            carried = record.payload
            assert isinstance(carried, LogTruncated)
            fork_seq, steers = carried.fork_seq, dict(carried.steer_sources)
            created = None  # the carried one, kept below unless a later one replaces it
            carried_created = carried.created
        elif kind == ConversationCreated.KIND:
            created, carried_created = record, None
            if is_fork_marker(record):
                fork_seq = record.seq
        elif (steer := steer_source(record)) is not None:
            steers[steer[0]] = steer[1]
    path, parents, groups = transcript.export()
    return RecordDraft(
        LogTruncated(
            last_hash=replaced.hash,
            truncated_at=now_rfc3339(),
            removed=through,
            path=path,
            parents=parents,
            groups=groups,
            messages=transcript.messages(),
            created=created.to_wire() if created is not None else carried_created,
            fork_seq=fork_seq,
            steer_sources=steers,
            usage=usage,
            model_calls=model_calls,
            cost=cost,
        ),
        time=replaced.time,
    )
