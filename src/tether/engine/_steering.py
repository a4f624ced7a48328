"""What a running attempt has heard of steering, so that it asks the store only when a steer
or follow-up may be waiting for it.

An agent checks for steering at every safe point (after each tool batch, before it answers),
and a check is a store query. Most checks find nothing, so the query is made only when:

- a steer or follow-up for the conversation was admitted by this process since the last
  check (the runtime admits them, so it tells the watch at once), or a store with a change
  feed announced one admitted elsewhere (PostgreSQL NOTIFY, topic ``steer:<conversation>``);
- it is the attempt's first check and steering may predate its watch: unless its claim found
  nothing else of its session queued (``ClaimedHead.alone``), as a claim in its own
  admission's commit always does;
- the store has no change feed, so another process sharing it (a second server on one
  SQLite file) could have admitted one unheard: then at most every ``poll`` seconds.

A steer the watch misses (one admitted elsewhere in the instant between an admission's
claim and its watch) is not lost: it stays queued, and runs as a message of its own once the
run it was meant for has settled.
"""

from __future__ import annotations

import contextlib

from tether.engine._clock import Clock
from tether.store import ChangeFeed

__all__ = ("SteerWatch", "SteerWatches")


class SteerWatch:
    """One attempt's: :meth:`due` says whether its next check must ask the store."""

    def __init__(
        self,
        conversation_id: str,
        *,
        feed: ChangeFeed | None,
        known_clear: bool,
        poll: float,
        clock: Clock,
    ) -> None:
        self._pending = not known_clear
        self._poll = None if feed is not None else poll  # a change feed announces steers
        self._clock = clock
        self._asked_at = clock.monotonic()
        self._stack = contextlib.ExitStack()
        self._announced = (
            self._stack.enter_context(feed.listen(f"steer:{conversation_id}"))
            if feed is not None
            else None
        )

    def heard(self) -> None:
        """A steer or follow-up for this conversation was admitted."""
        self._pending = True

    def due(self) -> bool:
        """Whether to ask the store now; if so, what is heard from here on is news."""
        announced = self._announced is not None and self._announced.is_set()
        polled = self._poll is not None and self._clock.monotonic() - self._asked_at >= self._poll
        if not (self._pending or announced or polled):
            return False
        self._pending = False
        if self._announced is not None:
            self._announced.clear()
        self._asked_at = self._clock.monotonic()
        return True

    def close(self) -> None:
        self._stack.close()


class SteerWatches:
    """The runtime's watches, by conversation: one per attempt running here."""

    def __init__(self, *, poll: float, clock: Clock) -> None:
        self._poll = poll
        self._clock = clock
        self._watches: dict[str, SteerWatch] = {}

    def open(
        self, conversation_id: str, *, feed: ChangeFeed | None, known_clear: bool
    ) -> SteerWatch:
        """A watch for an attempt about to run in ``conversation_id``; ``known_clear``: its
        claim committed with nothing else of its session queued."""
        watch = SteerWatch(
            conversation_id,
            feed=feed,
            known_clear=known_clear,
            poll=self._poll,
            clock=self._clock,
        )
        previous = self._watches.get(conversation_id)
        if previous is not None:
            previous.close()
        self._watches[conversation_id] = watch
        return watch

    def close(self, conversation_id: str, watch: SteerWatch) -> None:
        watch.close()
        if self._watches.get(conversation_id) is watch:
            del self._watches[conversation_id]

    def heard(self, conversation_id: str) -> None:
        """This process admitted a steer or follow-up into ``conversation_id``."""
        watch = self._watches.get(conversation_id)
        if watch is not None:
            watch.heard()
