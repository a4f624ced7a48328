"""The long-term memory rules of the reference state machine: items put, replaced, read,
deleted, listed and searched by keywords and by vector (scores compared exactly: every
backend ranks with the same code), and erased by prefix, optionally by age.

A mixin of :class:`tether.testing.storetest._machine._ReferenceMachine`, which supplies the
stores, the event loop and ``_both`` (run one operation on both, require the same outcome).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

from tether.testing.storetest._base import CompleteStore, Needed

__all__ = ("MemoryRules",)

NAMESPACES = (("a",), ("a", "x"), ("a", "x", "y"), ("ab",), ("b", "x"))
PREFIXES = ((), ("a",), ("a", "x"), ("b",), ("c",))
KEYS = ("k1", "k2", "é")
WORDS = ("tea", "coffee", "Green", "black", "5pm")
TEXTS = st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join)
VECTORS = st.none() | st.lists(st.integers(-3, 3), min_size=1, max_size=3).map(
    lambda xs: [float(x) for x in xs]
)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-100, 100) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=4,
)


class MemoryRules:
    """Rules over the machine's memory items; the machine supplies what is declared here."""

    def _both(
        self,
        operation: Callable[[CompleteStore], Awaitable[Any]],
        *,
        count: bool = True,
        needs: Needed | None = None,
    ) -> Any:
        raise NotImplementedError

    def _now(self) -> datetime:
        raise NotImplementedError

    @rule(
        namespace=st.sampled_from(NAMESPACES),
        key=st.sampled_from(KEYS),
        value=VALUES,
        text=TEXTS,
        vector=VECTORS,
    )
    def put_memory(
        self, namespace: tuple[str, ...], key: str, value: Any, text: str, vector: Any
    ) -> None:
        now = self._now()
        self._both(
            lambda s: s.put_memory(namespace, key, value, text=text, embedding=vector, now=now),
            needs="memory",
        )

    @rule(namespace=st.sampled_from(NAMESPACES), key=st.sampled_from(KEYS))
    def get_or_delete_memory(self, namespace: tuple[str, ...], key: str) -> None:
        self._both(lambda s: s.get_memory(namespace, key), needs="memory")
        if key == "k2":
            self._both(lambda s: s.delete_memory(namespace, key), needs="memory")

    @rule(prefix=st.sampled_from(PREFIXES), limit=st.integers(1, 4), offset=st.integers(0, 3))
    def list_memory(self, prefix: tuple[str, ...], limit: int, offset: int) -> None:
        self._both(lambda s: s.list_memory(prefix, limit=limit, offset=offset), needs="memory")
        self._both(
            lambda s: s.memory_namespaces(prefix, limit=limit, offset=offset), needs="memory"
        )

    @rule(
        prefix=st.sampled_from(PREFIXES),
        text=st.none() | TEXTS,
        vector=VECTORS,
        limit=st.integers(1, 4),
        offset=st.integers(0, 2),
        scan=st.integers(1, 6),
    )
    def search_memory(
        self,
        prefix: tuple[str, ...],
        text: str | None,
        vector: Any,
        limit: int,
        offset: int,
        scan: int,
    ) -> None:
        self._both(
            lambda s: s.search_memory(
                prefix, text=text, vector=vector, limit=limit, offset=offset, scan=scan
            ),
            needs="memory",
        )

    @rule(prefix=st.sampled_from(PREFIXES), age=st.none() | st.integers(0, 5))
    def erase_memory(self, prefix: tuple[str, ...], age: int | None) -> None:
        before = None if age is None else self._now() - timedelta(seconds=age)
        self._both(lambda s: s.erase_memory(prefix, updated_before=before), needs="memory")
