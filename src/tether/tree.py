"""The pure reducer from a conversation log to a parent-linked tree and its active path.

Every record becomes a node; nothing is ever removed. A record's parent is the
current leaf. A ``compaction`` record whose ``firstKeptSeq`` lies on the active path is
spliced in as the parent of that kept record (it takes over the kept record's old
parent), so the summarized records stay reachable with their parents unchanged, and
the active path becomes ``[compaction, kept, …, leaf]``. A compaction that keeps
nothing on the active path becomes the new leaf and starts the path on its own.

Example::

    tree = reduce(records)
    context = [tree.node(seq).record for seq in tree.active_path]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tether._payloads import Compaction
from tether.records import Record

__all__ = ("Node", "Tree", "reduce")


@dataclass(frozen=True, slots=True)
class Node:
    """One record in the tree. ``parent`` is the parent's seq (``None`` for the root)."""

    record: Record
    parent: int | None

    @property
    def seq(self) -> int:
        return self.record.seq


@dataclass(frozen=True, slots=True)
class Tree:
    """The reduction of a log: one node per record in log order, plus the active path."""

    nodes: tuple[Node, ...]
    active_path: tuple[int, ...]
    """Seqs from the latest compaction (or the root) down to the leaf."""
    by_seq: Mapping[int, Node] = field(repr=False, compare=False)

    def node(self, seq: int) -> Node:
        """The node of the record at ``seq``."""
        return self.by_seq[seq]

    def parent_of(self, seq: int) -> int | None:
        return self.node(seq).parent

    @property
    def leaf(self) -> int | None:
        return self.active_path[-1] if self.active_path else None

    def active_records(self) -> list[Record]:
        """The records of the active path, in path order."""
        return [self.by_seq[seq].record for seq in self.active_path]


def reduce(records: Iterable[Record]) -> Tree:
    """Reduce a log (in seq order) to its tree. Deterministic and prefix-consistent."""
    ordered: list[Record] = []
    parents: dict[int, int | None] = {}
    active: list[int] = []
    position: dict[int, int] = {}  # seq -> index in `active`
    for record in records:
        seq = record.seq
        ordered.append(record)
        kept: int | None = None
        if record.kind == Compaction.KIND:
            payload = record.payload
            assert isinstance(payload, Compaction)
            kept = payload.first_kept_seq
        if kept is not None and kept in position:
            parents[seq] = parents[kept]
            parents[kept] = seq
            active = [seq, *active[position[kept] :]]
            position = {s: i for i, s in enumerate(active)}
            continue
        parents[seq] = active[-1] if active else None
        if kept is not None:
            active = []
            position = {}
        position[seq] = len(active)
        active.append(seq)
    nodes = tuple(Node(record, parents[record.seq]) for record in ordered)
    return Tree(nodes, tuple(active), {node.seq: node for node in nodes})
