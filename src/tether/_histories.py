"""What was last computed over a growing history, to resume from rather than redo.

A conversation's history is rebuilt from the same message objects at every model call and
every execution (the journal projects each record once), and grows by a few messages each
time. Work done over it (hashing it, rendering it) is remembered with the history it covered,
and taken up again for a longer history that starts with the very same objects: its cost
then follows what was added, not the length of the conversation.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from itertools import islice
from typing import Generic, TypeVar

__all__ = ("HistoryMemo",)

_Work = TypeVar("_Work")


class HistoryMemo(Generic[_Work]):
    """A bounded memo of work over histories, by a key that names a history's start.

    Bounded by count and by the messages its entries hold together (each holds a whole
    history, so a count alone would let memory grow with the length of conversations). Safe
    when event loops on several threads share it: each step is one atomic dict operation,
    and an entry another thread evicted first is simply gone.

    Example::

        memo: HistoryMemo[bytes] = HistoryMemo(entries=256, messages=16_384)
        covered, work = memo.resumable(key, history) or (0, b"")
        memo.remember(key, history, work + more(history[covered:]))
    """

    def __init__(self, *, entries: int, messages: int) -> None:
        self.entries = entries
        self.messages = messages
        self._kept: OrderedDict[Hashable, tuple[tuple[object, ...], _Work]] = OrderedDict()
        self._held = 0  # messages held by the entries (approximate if threads race)

    @property
    def held(self) -> int:
        """The messages the entries hold together (as last counted)."""
        return self._held

    def resumable(self, key: Hashable, history: Sequence[object]) -> tuple[int, _Work] | None:
        """``(covered, work)`` when the history remembered under ``key`` is the start of
        ``history``, its messages after the first the very same objects (identity, not
        equality: the first is the key's to compare); else ``None``."""
        known = self._kept.get(key)
        if known is None or len(known[0]) > len(history):
            return None
        covered, work = known
        if not all(map(operator.is_, islice(covered, 1, None), islice(history, 1, None))):
            return None
        return len(covered), work

    def remember(self, key: Hashable, history: Sequence[object], work: _Work) -> None:
        """Keep ``work`` as done over ``history`` (held as a tuple: the ids of its objects,
        which keys may use, are not reused while the entry lives)."""
        covered = tuple(history)
        replaced = self._kept.pop(key, None)
        self._held += len(covered) - (len(replaced[0]) if replaced is not None else 0)
        self._kept[key] = (covered, work)
        while len(self._kept) > 1 and (
            len(self._kept) > self.entries or self._held > self.messages
        ):
            try:
                _, (forgotten, _) = self._kept.popitem(last=False)
            except KeyError:  # another thread emptied it meanwhile
                break
            self._held -= len(forgotten)

    def entries_held(self) -> list[int]:
        """The length of each remembered history (for tests of the bounds)."""
        return [len(covered) for covered, _ in list(self._kept.values())]
