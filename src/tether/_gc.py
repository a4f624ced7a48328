"""Pausing the cyclic garbage collector while a long log is decoded.

Decoding thousands of records allocates tens of thousands of container objects (decoded
JSON, typed payloads, messages) that all survive. Each burst of allocations triggers a
collection, and the full ones scan the whole heap again, the interpreter's modules
included: measured on a cold load of a 10k-record log, that was half the time (270 ms
against 131 ms with the collector paused). A decode makes no reference cycles, so nothing
is left for the collector that pausing it would keep alive.

The pause is process-wide (the collector is), so it is kept to the synchronous stretch of
one bulk decode (or a replay, which awaits nothing but its own served effects), counted so
overlapping pauses on several threads resume it only once the last one ends, and never
resumes a collector the application itself turned off.

When the last pause ends, what the decode made is moved straight to the oldest generation
(``gc.freeze`` then ``gc.unfreeze``: two list splices). It is the view, long-lived by nature,
and otherwise the first young collection after the pause would scan all of it (a tenth of
a cold load of 10k records). Young objects of the rest of the process move with it; cycles
among them wait for the next full collection instead of the next young one. An application
that froze objects itself (a pre-forking server), or a process whose start-up heap was
frozen (:func:`freeze_startup_heap`, as ``tether serve`` does), is left alone: unfreezing
would put those objects back under collection.

Whether anything is frozen is decided from what the process knows, never by counting the
frozen objects on every pause: ``gc.get_freeze_count`` walks the whole permanent
generation (in CPython 3.11, hundreds of thousands of objects after a freeze of the start-up
heap: a third of a served request's CPU when each read asked). It is asked only while the
answer is zero, when it costs nothing; once it is not, the answer is remembered.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ("BULK", "collector_paused", "freeze_startup_heap")

BULK = 512
"""Fewer records than this decode fast enough that the collector is left alone."""

_lock = threading.Lock()
_pauses = 0
_paused_it = False
_frozen = False
"""Objects were frozen (by us or the application): the splice must never run again."""


def freeze_startup_heap() -> None:
    """Move everything allocated so far (the interpreter, the libraries, the app) out of the
    collector's reach: a full collection otherwise rescans it all, about 45 ms in a served
    process, a stall that lands on whichever request is running. For a process that is
    ours to tune (``tether serve``, ``tether worker``), once start-up is done.

    Example::

        freeze_startup_heap()  # after imports and app construction, before serving
    """
    global _frozen
    gc.collect()
    gc.freeze()
    _frozen = True


@contextmanager
def collector_paused(records: int) -> Iterator[None]:
    """Pause the cyclic collector around the decoding of ``records`` records, if they are
    at least :data:`BULK`. The block should not await anything that waits on the outside
    world: other tasks would run, for as long as it waits, with the collector paused."""
    global _pauses, _paused_it
    if records < BULK:
        yield
        return
    with _lock:
        _pauses += 1
        if _pauses == 1 and gc.isenabled():
            gc.disable()
            _paused_it = True
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _paused_it:
                _paused_it = False
                _move_to_oldest()
                gc.enable()


def _move_to_oldest() -> None:
    """Every tracked object to the oldest generation, unless objects are frozen."""
    global _frozen
    if _frozen:
        return
    if gc.get_freeze_count() != 0:  # zero costs nothing to count; remember anything else
        _frozen = True
        return
    gc.freeze()
    gc.unfreeze()
