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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tether._payloads import Compaction
from tether.records import Record

__all__ = ("Node", "Reducer", "Tree", "reduce")


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


class Reducer:
    """The reduction, fed one record at a time (what ``reduce`` folds over a whole log).

    Example::

        reducer = Reducer()
        for record in records:
            rebuilt = reducer.add(record)  # True when a compaction re-rooted the path
        print(reducer.active_path)
    """

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.parents: dict[int, int | None] = {}
        self.active_path: list[int] = []
        self._position: dict[int, int] = {}  # seq -> index in active_path

    def add(self, record: Record) -> bool:
        """Add the next record; return whether the active path was rebuilt (not just extended)."""
        seq = record.seq
        self.records.append(record)
        kept: int | None = None
        if record.kind == Compaction.KIND:
            payload = record.payload
            assert isinstance(payload, Compaction)
            kept = payload.first_kept_seq
        if kept is not None and kept in self._position:
            self.parents[seq] = self.parents[kept]
            self.parents[kept] = seq
            self.active_path = [seq, *self.active_path[self._position[kept] :]]
            self._position = {s: i for i, s in enumerate(self.active_path)}
            return True
        self.parents[seq] = self.active_path[-1] if self.active_path else None
        if kept is not None:  # it keeps nothing on the path: it starts the path afresh
            self.active_path = []
            self._position = {}
        self._position[seq] = len(self.active_path)
        self.active_path.append(seq)
        return kept is not None

    def resume_path(self, active_path: Sequence[int], parents: Sequence[int | None]) -> None:
        """Continue from a known active path (and its nodes' parents) instead of being fed the
        records before it: all that later records and compactions act on. ``tree()`` then
        holds only the records added after."""
        self.records = []
        self.active_path = list(active_path)
        self.parents = dict(zip(active_path, parents, strict=True))
        self._position = {seq: i for i, seq in enumerate(self.active_path)}

    def tree(self) -> Tree:
        nodes = tuple(Node(record, self.parents[record.seq]) for record in self.records)
        return Tree(nodes, tuple(self.active_path), {node.seq: node for node in nodes})


def reduce(records: Iterable[Record]) -> Tree:
    """Reduce a log (in seq order) to its tree. Deterministic and prefix-consistent."""
    reducer = Reducer()
    for record in records:
        reducer.add(record)
    return reducer.tree()
