"""The bounds the store keeps and the wire checks a request against: the largest sequence
number (:data:`MAX_SEQ`), a submission's priorities (:data:`PRIORITY_MIN`,
:data:`PRIORITY_MAX`) and a schedule's periods (:data:`MAX_PERIOD`, :data:`MAX_CATCH_UP`).

Their home is here, below every layer, so the store, the engine and the light wire models
(:mod:`tether.wire`) share one definition; each is exported where it belongs.
"""

from __future__ import annotations

from typing import Final

__all__ = ("MAX_CATCH_UP", "MAX_PERIOD", "MAX_SEQ", "PRIORITY_MAX", "PRIORITY_MIN")

MAX_SEQ: Final = 2**63 - 1
"""The largest sequence number a store keeps (a signed 64-bit integer): the bound every
number that names a record is checked against, at the HTTP and the Runtime boundary."""
PRIORITY_MIN = -1000
"""The lowest priority a submission may have (``0`` is the default; higher runs first)."""
PRIORITY_MAX = 1000
"""The highest priority a submission may have."""
MAX_CATCH_UP = 100
"""The most missed windows one schedule may catch up (in one pass: the latest ones)."""
MAX_PERIOD = 366 * 86_400
"""Seconds: the longest ``every`` and ``grace`` (a leap year); longer is a mistake, and
past about 10**14 s a period no longer counts in microseconds."""
