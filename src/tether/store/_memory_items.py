"""Long-term memory items in the store (the ``memory`` capability): JSON values kept under a
namespace (a tuple of labels, such as ``(tenant, user, agent)``) and a key, found again by
key, by namespace prefix, by keywords or by the similarity of an embedding the application
computed.

What every backend shares lives here, so they agree to the byte: how a namespace is encoded
so that a prefix is a range of one index (:func:`encode_namespace`), how text becomes the
keywords search matches (:func:`keywords`: runs of letters and digits, lowercased; SQLite
indexes them with FTS5, PostgreSQL as a ``tsvector`` built from exactly these words, the
memory store as sets), how an embedding is packed (float64, little-endian) and how a hit is
scored (:func:`cosine`, computed in Python on every backend over at most ``scan`` items: a
brute-force bound, not an index).
"""

from __future__ import annotations

import math
import operator
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import orjson
from pydantic import JsonValue

from tether._canonical import canonical_json
from tether.store._common import from_micros, to_micros

__all__ = (
    "MAX_MEMORY_SCAN",
    "MEMORY_SCAN",
    "MemoryHit",
    "MemoryItem",
    "MemoryWrite",
    "Namespace",
    "check_memory_key",
    "check_memory_page",
    "check_namespace",
    "check_prefix",
    "check_vector",
    "cosine",
    "decode_namespace",
    "encode_namespace",
    "item_of",
    "keywords",
    "memory_write",
    "pack_vector",
    "prefix_range",
    "rank_by_vector",
    "unpack_vector",
)

Namespace = tuple[str, ...]
"""Where a memory item lives: one label or more, outermost first (``("acme", "u-1",
"support")``)."""

MEMORY_SCAN: Final = 1_000
"""How many items a semantic search scores by default: the most recently updated ones under
its prefix (with an embedding, and matching its keywords if it has any)."""
MAX_MEMORY_SCAN: Final = 100_000
"""The most a semantic search may be asked to score (``scan``)."""

_END: Final = "\x1e"  # ends every label: no label holds it (nor any other control character)
_AFTER_END: Final = "\x1f"
_WORD: Final = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One kept value: its ``namespace`` and ``key``, the JSON ``value``, the ``text`` its
    keywords come from, and when it was first put and last replaced (UTC).

    Example::

        item = await memory.get(("acme", "u-1"), "diet")
        print(item.value, item.updated_at) if item else None
    """

    namespace: Namespace
    key: str
    value: JsonValue
    text: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """A search's answer: the ``item``, and its ``score`` (the cosine similarity of its
    embedding to the query's, in [-1, 1]; ``None`` for a keyword-only search, whose hits
    come most recently updated first)."""

    item: MemoryItem
    score: float | None = None


def check_namespace(namespace: Sequence[str]) -> Namespace:
    """``namespace`` as a tuple, or ``ValueError``: one label or more, each a non-empty
    string without control characters."""
    if isinstance(namespace, str) or not namespace:
        raise ValueError("a memory namespace is a non-empty tuple of labels")
    return check_prefix(namespace)


def check_prefix(prefix: Sequence[str]) -> Namespace:
    """``prefix`` as a tuple (``()``: every namespace), or ``ValueError`` for a label that
    is empty, not a string, or holds a control character."""
    if isinstance(prefix, str):
        raise ValueError("a memory namespace is a tuple of labels, not a string")
    labels = tuple(prefix)
    for label in labels:
        if not isinstance(label, str) or not label:
            raise ValueError(f"a memory namespace label must be a non-empty string: {label!r}")
        if any(ord(char) < 0x20 for char in label):
            raise ValueError(f"a memory namespace label holds a control character: {label!r}")
        _storable(label, "namespace label")
    return labels


def check_memory_key(key: str) -> str:
    """``key``, or ``ValueError`` for one that is empty, not a string, or not storable."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"a memory key must be a non-empty string: {key!r}")
    return _storable(key, "key")


def _storable(value: str, what: str) -> str:
    """``value``, or ``ValueError`` for a string no backend keeps as text: a NUL, or a lone
    surrogate (no UTF-8 encoding)."""
    if "\x00" in value:
        raise ValueError(f"a memory {what} holds a NUL character")
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise ValueError(f"a memory {what} is not valid Unicode: {exc}") from exc
    return value


def check_memory_page(limit: int, offset: int, scan: int = MEMORY_SCAN) -> None:
    """``ValueError`` unless ``1 <= limit <= 1000``, ``offset >= 0`` and
    ``1 <= scan <= MAX_MEMORY_SCAN``."""
    if not 1 <= limit <= 1000:
        raise ValueError(f"limit must be between 1 and 1000, not {limit}")
    if offset < 0:
        raise ValueError(f"offset must be 0 or more, not {offset}")
    if not 1 <= scan <= MAX_MEMORY_SCAN:
        raise ValueError(f"scan must be between 1 and {MAX_MEMORY_SCAN}, not {scan}")


def check_vector(vector: Sequence[float]) -> tuple[float, ...]:
    """``vector`` as a tuple of floats, or ``ValueError`` for an empty one or one holding
    something other than a finite number."""
    values = tuple(float(x) for x in vector)
    if not values:
        raise ValueError("an embedding has at least one dimension")
    if not all(math.isfinite(x) for x in values):
        raise ValueError("an embedding holds only finite numbers")
    return values


def encode_namespace(namespace: Namespace) -> str:
    """The stored form: each label followed by U+001E, so that the namespaces under a prefix
    are the range :func:`prefix_range` gives (compared as code points)."""
    return "".join(label + _END for label in namespace)


def decode_namespace(encoded: str) -> Namespace:
    """The tuple :func:`encode_namespace` encoded."""
    return tuple(encoded.split(_END)[:-1])


def prefix_range(prefix: Namespace) -> tuple[str, str] | None:
    """The encoded namespaces under ``prefix`` are ``low <= ns < high``; ``None`` for ``()``
    (every namespace)."""
    if not prefix:
        return None
    low = encode_namespace(prefix)
    return low, low[:-1] + _AFTER_END


def keywords(text: str) -> list[str]:
    """The words keyword search matches: runs of letters and digits, lowercased, each once,
    in order of first appearance."""
    return list(dict.fromkeys(_WORD.findall(text.lower())))


def pack_vector(vector: tuple[float, ...]) -> bytes:
    """An embedding as stored: float64, little-endian."""
    return struct.pack(f"<{len(vector)}d", *vector)


def unpack_vector(blob: bytes) -> tuple[float, ...]:
    """What :func:`pack_vector` packed."""
    return struct.unpack(f"<{len(blob) // 8}d", blob)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two vectors of one length (0.0 when either is zero)."""
    if len(a) != len(b):
        raise ValueError(f"vectors of {len(a)} and {len(b)} dimensions")
    return _cosine(a, b, _norm(b))


def _norm(vector: Sequence[float]) -> float:
    return math.sqrt(sum(map(operator.mul, vector, vector)))


def _cosine(a: Sequence[float], b: Sequence[float], b_norm: float) -> float:
    norms = _norm(a) * b_norm
    return 0.0 if norms == 0 else sum(map(operator.mul, a, b)) / norms


def rank_by_vector(
    candidates: Sequence[tuple[MemoryItem, tuple[float, ...]]],
    vector: tuple[float, ...],
    limit: int,
    offset: int,
) -> list[MemoryHit]:
    """The candidates whose embedding has ``vector``'s length, most similar first (then by
    namespace and key), the page ``offset``..``offset + limit``: every backend ranks its
    candidates with this, so they agree."""
    query_norm = _norm(vector)  # once, not per candidate
    scored = [
        MemoryHit(item, _cosine(embedding, vector, query_norm))
        for item, embedding in candidates
        if len(embedding) == len(vector)
    ]
    scored.sort(key=lambda hit: (-(hit.score or 0.0), hit.item.namespace, hit.item.key))
    return scored[offset : offset + limit]


@dataclass(frozen=True, slots=True)
class MemoryWrite:
    """A checked ``put_memory``, as every backend keeps it: the value's canonical JSON, the
    keywords of its text (``words``, joined by spaces: what SQLite's FTS5 and PostgreSQL's
    ``tsvector`` index), the packed embedding, and ``now`` in UTC to the microsecond."""

    namespace: Namespace
    key: str
    value: bytes
    text: str
    words: str
    embedding: bytes | None
    now: datetime

    def item(self, created_at: datetime) -> MemoryItem:
        """The item this write keeps, first put at ``created_at``."""
        return item_of(self.namespace, self.key, self.value, self.text, created_at, self.now)


def memory_write(
    namespace: Sequence[str],
    key: str,
    value: object,
    text: str,
    embedding: Sequence[float] | None,
    now: datetime,
) -> MemoryWrite:
    """Check a ``put_memory``'s arguments (``ValueError``) and prepare what is kept."""
    labels = check_namespace(namespace)
    check_memory_key(key)
    if not isinstance(text, str):
        raise ValueError("a memory item's text is a string")
    _storable(text, "text")
    try:
        encoded = canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"a memory value must be JSON: {exc}") from exc
    packed = None if embedding is None else pack_vector(check_vector(embedding))
    return MemoryWrite(
        labels, key, encoded, text, " ".join(keywords(text)), packed, from_micros(to_micros(now))
    )


def item_of(
    namespace: Namespace,
    key: str,
    value: bytes,
    text: str,
    created_at: datetime,
    updated_at: datetime,
) -> MemoryItem:
    """A stored row as a :class:`MemoryItem` (its value decoded afresh: no caller shares
    another's)."""
    return MemoryItem(namespace, key, orjson.loads(value), text, created_at, updated_at)
