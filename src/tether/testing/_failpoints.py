"""Failpoints for a test: :func:`failpoints` arms a spec for the length of a ``with`` block
and says how often each point was reached and fired (docs/testing.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tether._failpoints import Failpoint, arm, disarm, parse_failpoints

__all__ = ("Failpoints", "failpoints")


class Failpoints:
    """The failpoints one test armed: :meth:`arm` more, read :meth:`hits` and
    :meth:`fired`, :meth:`clear` them (the ``with`` block's end does).

    Example::

        with failpoints("tool.call=error(once)") as armed:
            ...
            assert armed.fired("tool.call") == 1
    """

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = seed
        self._armed: list[Failpoint] = []

    def arm(self, spec: str) -> None:
        """Arm the entries of ``spec`` (the grammar of ``TETHER_FAILPOINTS``) ahead of those
        armed before: for a point both match, the newest entry is the one it hits.
        :class:`~tether.errors.FailpointSpecInvalid` if it does not parse."""
        points = parse_failpoints(spec, seed=self.seed)
        arm(points)
        self._armed[:0] = points

    def _matching(self, pattern: str) -> list[Failpoint]:
        return [point for point in self._armed if point.pattern == pattern]

    def hits(self, pattern: str) -> int:
        """How many calls reached the entries armed for ``pattern`` (as it was written)."""
        return sum(point.hits for point in self._matching(pattern))

    def fired(self, pattern: str) -> int:
        """How many of those calls it acted on."""
        return sum(point.fired for point in self._matching(pattern))

    def clear(self) -> None:
        """Disarm what this armed."""
        disarm(self._armed)
        self._armed.clear()

    def __str__(self) -> str:
        return "; ".join(str(point) for point in self._armed)


@contextlib.contextmanager
def failpoints(spec: str = "", *, seed: int = 0) -> Iterator[Failpoints]:
    """Arm ``spec`` (the grammar of ``TETHER_FAILPOINTS``, docs/testing.md) until the block
    ends; ``seed`` seeds the probabilities. Armed before a runtime starts, they reach its
    store too; an attempt's model and tool calls, whenever it starts.

    Example::

        with failpoints("store.append=error(nth(2)); model.request=delay(5)") as armed:
            runtime = Runtime(store, agents=agents, clock=clock)
            ...
            assert armed.fired("store.append") == 1
    """
    armed = Failpoints(seed=seed)
    try:
        armed.arm(spec)
        yield armed
    finally:
        armed.clear()
