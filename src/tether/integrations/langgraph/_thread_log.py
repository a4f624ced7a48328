"""A LangGraph thread as its Tether log holds it: each ``put`` one ``step_recorded`` record
named :data:`CHECKPOINT`, each ``put_writes`` one named :data:`WRITES`, folded here into
what the saver answers from (the checkpoints by namespace and id, the channel values by
version, each checkpoint's pending writes).

A checkpoint record carries only the channels its ``new_versions`` name, so a step writes
what changed, not the whole state; the others are found at the version the checkpoint
names, in an earlier record. Records are facts, folded in log order: a checkpoint put again
replaces the first, a task's write at an index it already wrote is kept as it was (an
error, an interrupt or a resume, LangGraph's special writes, replace theirs).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from langgraph.checkpoint.base import WRITES_IDX_MAP, writes_sort_key
from pydantic import JsonValue

from tether._canonical import canonical_json
from tether.records import Record, StepRecorded

__all__ = ("CHECKPOINT", "WRITES", "StoredCheckpoint", "StoredWrite", "ThreadLog", "write_index")

CHECKPOINT = "langgraph.checkpoint"
"""The name of the ``step_recorded`` record of one ``put``."""
WRITES = "langgraph.writes"
"""The name of the ``step_recorded`` record of one ``put_writes``."""


def write_index(channel: str, position: int) -> int:
    """Where a write sits among its task's: its position, or a special channel's own
    negative index (LangGraph's ``WRITES_IDX_MAP``)."""
    return WRITES_IDX_MAP.get(channel, position)


def version_key(version: JsonValue) -> str:
    """A channel version as a key (``1`` and ``"1"`` stay apart)."""
    return canonical_json(version).decode()


@dataclass(frozen=True)
class StoredCheckpoint:
    """One checkpoint: its record's ``value`` and where the record is."""

    seq: int
    ns: str
    id: str
    parent: str | None
    body: JsonValue
    """The checkpoint without its channel values, encoded (``CheckpointSerde``)."""
    metadata: JsonValue
    versions: Mapping[str, JsonValue]
    """``channel_versions``: which stored value of each channel it holds."""


@dataclass(frozen=True)
class StoredWrite:
    task_id: str
    task_path: str
    index: int
    channel: str
    value: JsonValue


@dataclass
class ThreadLog:
    """The fold of one thread's records, up to :attr:`seq`."""

    conversation_id: str
    seq: int = 0
    checkpoints: dict[tuple[str, str], StoredCheckpoint] = field(default_factory=dict)
    values: dict[tuple[str, str, str], JsonValue | None] = field(default_factory=dict)
    """``(ns, channel, version key)`` to the encoded value (``None``: the channel was empty)."""
    writes: dict[tuple[str, str], dict[tuple[str, int], StoredWrite]] = field(default_factory=dict)

    def take(self, records: list[Record]) -> None:
        for record in records:
            self.seq = record.seq
            payload = record.payload
            if not isinstance(payload, StepRecorded) or not isinstance(payload.value, dict):
                continue
            if payload.name == CHECKPOINT:
                self._take_checkpoint(record.seq, payload.value)
            elif payload.name == WRITES:
                self._take_writes(payload.value)

    def _take_checkpoint(self, seq: int, value: dict[str, JsonValue]) -> None:
        ns, id_, parent = value["ns"], value["id"], value["parent"]
        versions, stored = value["versions"], value["values"]
        assert isinstance(ns, str) and isinstance(id_, str), value
        assert parent is None or isinstance(parent, str), value
        assert isinstance(versions, dict) and isinstance(stored, list), value
        for entry in stored:
            assert isinstance(entry, list) and isinstance(entry[0], str), entry
            self.values[(ns, entry[0], version_key(entry[1]))] = entry[2]
        self.checkpoints[(ns, id_)] = StoredCheckpoint(
            seq, ns, id_, parent, value["body"], value["metadata"], versions
        )

    def _take_writes(self, value: dict[str, JsonValue]) -> None:
        ns, checkpoint_id, task_id, task_path = (
            value["ns"],
            value["checkpoint"],
            value["task"],
            value["path"],
        )
        assert isinstance(ns, str) and isinstance(checkpoint_id, str), value
        assert isinstance(task_id, str) and isinstance(task_path, str), value
        entries = value["writes"]
        assert isinstance(entries, list), value
        kept = self.writes.setdefault((ns, checkpoint_id), {})
        for entry in entries:
            assert isinstance(entry, list), entry
            index, channel, encoded = entry
            assert isinstance(index, int) and isinstance(channel, str), entry
            if index >= 0 and (task_id, index) in kept:
                continue
            kept[(task_id, index)] = StoredWrite(task_id, task_path, index, channel, encoded)

    def find(self, ns: str, checkpoint_id: str | None) -> StoredCheckpoint | None:
        """The namespace's checkpoint of that id, or its newest (``checkpoint_id`` ``None``)."""
        return self.checkpoints.get((ns, checkpoint_id)) if checkpoint_id else self.latest(ns)

    def latest(self, ns: str) -> StoredCheckpoint | None:
        """The namespace's newest checkpoint (LangGraph's ids sort by time)."""
        found = [c for (n, _), c in self.checkpoints.items() if n == ns]
        return max(found, key=lambda c: c.id) if found else None

    def newest_first(self, ns: str | None) -> Iterator[StoredCheckpoint]:
        found = [c for c in self.checkpoints.values() if ns is None or c.ns == ns]
        yield from sorted(found, key=lambda c: c.id, reverse=True)

    def channel_values(self, checkpoint: StoredCheckpoint) -> dict[str, JsonValue]:
        """The encoded value of each channel the checkpoint holds (an empty one left out)."""
        found: dict[str, JsonValue] = {}
        for channel, version in checkpoint.versions.items():
            value = self.values.get((checkpoint.ns, channel, version_key(version)))
            if value is not None:
                found[channel] = value
        return found

    def pending_writes(self, checkpoint: StoredCheckpoint) -> list[StoredWrite]:
        kept = self.writes.get((checkpoint.ns, checkpoint.id), {})
        return sorted(kept.values(), key=lambda w: writes_sort_key(w.task_path, w.task_id, w.index))
