"""Tool progress, live to whoever follows a session: ephemeral, never stored, never replayed.

A running tool's ``ctx.progress(text)`` reaches the runtime's observers as ``ToolProgress``;
the runtime's own :class:`ProgressHub` is one of them (``Runtime.progress``), and hands each
event to the subscriptions open on its session: the HTTP streams send them as SSE events
without an ``id:``, so a client that reconnects misses only the progress reported while it
was away, which was never meant to last.
"""

from __future__ import annotations

import asyncio
from collections import deque

from tether.engine._observe import EngineEvent, ToolProgress
from tether.store import SessionKey

__all__ = ("ProgressHub", "ProgressSubscription")

_BACKLOG = 64  # events a slow subscriber may fall behind by; older ones are dropped


class ProgressSubscription:
    """The tool progress of one session for one follower, as it comes."""

    def __init__(self) -> None:
        self._events: deque[ToolProgress] = deque(maxlen=_BACKLOG)
        self._arrived: asyncio.Future[None] | None = None

    def put(self, event: ToolProgress) -> None:
        self._events.append(event)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    def arrived(self) -> asyncio.Future[None]:
        """Resolves once an event is waiting (at once if one already is)."""
        if self._arrived is None or self._arrived.done():
            self._arrived = asyncio.get_running_loop().create_future()
        if self._events:
            self._arrived.set_result(None)
        return self._arrived

    def take(self) -> list[ToolProgress]:
        """Every event waiting, in order (none if none)."""
        events = list(self._events)
        self._events.clear()
        return events


class ProgressHub:
    """Fans a runtime's ``ToolProgress`` events out to the followers of their session.

    Example::

        subscription = runtime.progress.subscribe(SessionKey("assistant", "me", "default"))
        await subscription.arrived()
        texts = [event.text for event in subscription.take()]
    """

    def __init__(self) -> None:
        # Keyed by session, not conversation: a stream opened before its session's first
        # message subscribes before the conversation exists, and misses none of its progress.
        self._subscribers: dict[SessionKey, set[ProgressSubscription]] = {}

    def __call__(self, event: EngineEvent) -> None:
        """The engine observer."""
        if not isinstance(event, ToolProgress):
            return
        for subscription in self._subscribers.get(event.correlation.session_key, ()):
            subscription.put(event)

    @property
    def followers(self) -> int:
        """The subscriptions open now: the live streams following a session."""
        return sum(len(subscribers) for subscribers in self._subscribers.values())

    def subscribe(self, key: SessionKey) -> ProgressSubscription:
        subscription = ProgressSubscription()
        self._subscribers.setdefault(key, set()).add(subscription)
        return subscription

    def unsubscribe(self, key: SessionKey, subscription: ProgressSubscription) -> None:
        subscribers = self._subscribers.get(key)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[key]

    def __len__(self) -> int:
        """Sessions with a subscriber."""
        return len(self._subscribers)
