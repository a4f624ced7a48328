"""ULIDs: 48-bit millisecond time + 80 random bits, in Crockford base32 (26 characters).

Generating one is on the append hot path, so the random part is drawn as 16 bytes and
mapped to 16 base32 digits with one ``bytes.translate`` (each byte's low 5 bits are
uniform), and of the time part's 10 digits the first 8 are encoded once per 1,024 ms and
the last 2 looked up in a table: a sixth of the instructions python-ulid's ``str(ULID())``
takes (``benchmarks/handwritten.py``; docs/architecture.md §10 says why Tether keeps its own).
The output is a standard ULID (tests read it back through python-ulid). Ids are unique,
not secret. The generator is private, so minting ids never disturbs the global ``random``
state a caller (or Hypothesis) relies on; it reseeds in a forked child, so processes never
share a sequence.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from typing import overload

__all__ = ("UlidsOnDemand", "new_ulid")

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_LOW_FIVE_BITS = bytes(_ALPHABET[byte & 31].encode()[0] for byte in range(256))
_LAST_TWO_DIGITS = tuple(_ALPHABET[n >> 5] + _ALPHABET[n & 31] for n in range(1024))
"""The time part's last two digits (its low 10 bits), for every value they can take."""
_time_lead: tuple[int, str] = (-1, "")
"""The time part's first 8 digits and the 1,024 ms they stand for (``milliseconds >> 10``)."""
_random = random.Random()
os.register_at_fork(after_in_child=_random.seed)


def _encode_time(milliseconds: int) -> str:
    return "".join(_ALPHABET[(milliseconds >> shift) & 31] for shift in range(45, -1, -5))


def new_ulid() -> str:
    """A new ULID string, e.g. ``01JDQ2Z6M6V8N5W4X3Y2Z1A0BC``."""
    global _time_lead
    milliseconds = time.time_ns() // 1_000_000
    span, lead = _time_lead
    if span != milliseconds >> 10:  # appends at 1 a millisecond would miss a per-ms cache
        lead = _encode_time(milliseconds)[:8]
        _time_lead = (milliseconds >> 10, lead)
    return (
        lead
        + _LAST_TWO_DIGITS[milliseconds & 1023]
        + _random.randbytes(16).translate(_LOW_FIVE_BITS).decode("ascii")
    )


class UlidsOnDemand(Sequence[str]):
    """``count`` ULIDs, each made when first read: a claim offers an attempt id for every free
    slot (64 by default) and most passes claim none or one."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._made: list[str] = []

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError(index)
        while len(self._made) <= index:
            self._made.append(new_ulid())
        return self._made[index]
