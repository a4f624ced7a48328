"""A view's snapshot: what taking a log in derived from its records 1..seq, kept in the store
so that a reader coming to a long log cold does not decode every record again.

A snapshot is a cache, never a source of truth. It is taken only when a log is long, is
bound to its log by the hash of its last record, and a reader that cannot use it (another
format, another log, anything malformed) takes the records in one by one as it would without.
A full view still reads every record, and skips decoding them, the projection of executions
and the transcription, which cost several times the read. A lean view, what a new execution
starts from, reads only the latest execution's records and those after the snapshot; the
others stand as placeholders (:mod:`tether.journal._unread`) until a full refresh.

The body is the transcript's messages as a JSON array, a newline, then the indexes as one
line of JSON. The indexes are decoded at once; the messages (most of the bytes) only when the
transcript is first asked for, which a replay, say, never does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import orjson
from pydantic import BaseModel, TypeAdapter

from tether.journal._executions import (
    ExecutionRow,
    Executions,
    execution_rows,
    executions_from_rows,
)
from tether.journal._history import Transcript
from tether.messages import Message
from tether.records import Record

__all__ = (
    "MIN_RECORDS",
    "Snapshot",
    "SnapshotState",
    "SnapshotTranscript",
    "decode_snapshot",
    "encode_snapshot",
    "parse_snapshot",
    "snapshot_due",
)

FORMAT: Final = 2
"""2: a transcript shows only the tool results a provider takes (an older one may not)."""
MIN_RECORDS: Final = 4096
"""Shorter logs are not snapshotted: one is taken in from its records in under ~25 ms."""
_MESSAGES: Final = TypeAdapter(list[Message])


class _State(BaseModel):
    format: int
    seq: int
    hash: str
    executions: list[ExecutionRow]
    created: int
    fork_seq: int
    steer_sources: dict[str, str]
    path: list[int]
    parents: list[int | None]
    groups: list[tuple[int, int]]
    before_latest: tuple[int, int] | None


def snapshot_due(head: int, last: int) -> bool:
    """Whether a log at ``head`` deserves a new snapshot, the last one being at ``last``: once
    it is long, each time it grew by a quarter. A snapshot costs writing the transcript, so
    the writes add up to a bounded multiple of it, while a cold reader decodes at most a
    fifth of the log."""
    return head >= MIN_RECORDS and head - last >= max(MIN_RECORDS // 4, last // 4)


@dataclass(frozen=True, slots=True)
class SnapshotTranscript:
    """The transcript part of a snapshot, decoded on demand."""

    path: list[int]
    parents: list[int | None]
    groups: list[tuple[int, int]]
    before_latest: tuple[int, int] | None
    messages: bytes

    def restore(self) -> tuple[Transcript, tuple[int, list[Message]] | None]:
        """The transcript, and the one before the latest execution's start if kept;
        ``ValueError`` if the parts disagree."""
        messages = _MESSAGES.validate_json(self.messages)
        transcript = Transcript.restored(self.path, self.parents, self.groups, messages)
        before = self.before_latest
        if before is None:
            return transcript, None
        return transcript, (before[0], messages[: before[1]])


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A view's state at ``len(records)``, decoded from a snapshot body."""

    executions: Executions
    transcript: SnapshotTranscript
    created: Record | None
    fork_seq: int
    steer_sources: dict[str, str]


def encode_snapshot(
    records: list[Record],
    executions: Executions,
    transcript: Transcript,
    created: Record | None,
    fork_seq: int,
    steer_sources: dict[str, str],
    before_latest: tuple[int, list[Message]] | None,
) -> bytes:
    """The snapshot body of a view whose transcript is up to date with ``records``."""
    messages = transcript.messages()
    path, parents, groups = transcript.export()
    before = None
    if before_latest is not None:
        index, prior = before_latest
        # Kept as a count when it is the start of the current transcript (no compaction since).
        if len(prior) <= len(messages) and all(
            a is b for a, b in zip(prior, messages[: len(prior)], strict=True)
        ):
            before = (index, len(prior))
    state = {
        "format": FORMAT,
        "seq": len(records),
        "hash": records[-1].hash,
        "executions": execution_rows(executions),
        "created": -1 if created is None else created.seq - 1,
        "fork_seq": fork_seq,
        "steer_sources": steer_sources,
        "path": path,
        "parents": parents,
        "groups": groups,
        "before_latest": before,
    }
    encoded = _MESSAGES.dump_json(messages, by_alias=True, exclude_none=True)
    return encoded + b"\n" + orjson.dumps(state)


def parse_snapshot(body: bytes) -> SnapshotState | None:
    """A snapshot body's state (its messages still undecoded), or ``None`` if malformed."""
    try:
        cut = body.rindex(b"\n")
        state = _State.model_validate_json(body[cut + 1 :])
    except ValueError:  # pydantic's ValidationError is a ValueError
        return None
    return SnapshotState(state, body[:cut]) if state.format == FORMAT else None


def decode_snapshot(records: list[Record], body: bytes) -> Snapshot | None:
    """The state a snapshot body describes for ``records`` (all of the log up to its seq), or
    ``None`` if it does not describe them (its messages are checked when restored)."""
    parsed = parse_snapshot(body)
    return None if parsed is None else parsed.bind(records)


@dataclass(frozen=True, slots=True)
class SnapshotState:
    """A parsed snapshot, not yet bound to the records it describes."""

    _state: _State
    _messages: bytes

    @property
    def seq(self) -> int:
        return self._state.seq

    @property
    def latest_start(self) -> int:
        """The log index of the latest execution's start (``seq`` if none)."""
        rows = self._state.executions
        return rows[-1][2] if rows else self._state.seq

    @property
    def created(self) -> int:
        """The log index of the last ``conversation_created`` record (-1 if none)."""
        return self._state.created

    def submission_ids(self) -> dict[int, str | None]:
        """Each execution's start index -> its submission id."""
        return {start: submission for _, submission, start, *_ in self._state.executions}

    def bind(self, records: list[Record]) -> Snapshot | None:
        """The snapshot of ``records``, or ``None`` if it does not describe them."""
        state = self._state
        try:
            if state.seq != len(records) or state.hash != records[-1].hash:
                return None
            return Snapshot(
                executions_from_rows(records, state.executions),
                SnapshotTranscript(
                    state.path, state.parents, state.groups, state.before_latest, self._messages
                ),
                None if state.created < 0 else records[state.created],
                state.fork_seq,
                state.steer_sources,
            )
        except (ValueError, LookupError):  # LookupError: a placeholder (or gap) where it points
            return None
