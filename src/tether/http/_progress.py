"""Tool progress, live to stream subscribers: ephemeral, never stored, never replayed.

A running tool's ``ctx.progress(text)`` reaches the engine's observers as ``ToolProgress``;
:class:`ProgressHub` is one of them, and hands each event to the streams open on its
session. They send it as an SSE event without an ``id:``, so ``Last-Event-ID`` keeps
naming records: a client that reconnects resumes at the records and misses only the
progress reported while it was away, which was never meant to last.
"""

from __future__ import annotations

import asyncio
from collections import deque

import orjson

from tether.engine import EngineEvent, ToolProgress
from tether.store import SessionKey

__all__ = ("ProgressHub", "ProgressSubscription", "progress_frame")

_BACKLOG = 64  # events a slow subscriber may fall behind by; older ones are dropped


def progress_frame(event: ToolProgress) -> bytes:
    """``event: progress`` with the ids a client needs to place it, and no ``id:``."""
    data = orjson.dumps(
        {
            "type": "tool_progress",
            "conversationId": event.correlation.conversation_id,
            "submissionId": event.correlation.submission_id,
            "callId": event.call_id,
            "text": event.text,
        }
    )
    return b"event: progress\ndata: %s\n\n" % data


class ProgressSubscription:
    """The progress frames of one conversation for one stream, as they come."""

    def __init__(self) -> None:
        self._frames: deque[bytes] = deque(maxlen=_BACKLOG)
        self._arrived: asyncio.Future[None] | None = None

    def put(self, frame: bytes) -> None:
        self._frames.append(frame)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)

    def arrived(self) -> asyncio.Future[None]:
        """Resolves once a frame is waiting (at once if one already is)."""
        if self._arrived is None or self._arrived.done():
            self._arrived = asyncio.get_running_loop().create_future()
        if self._frames:
            self._arrived.set_result(None)
        return self._arrived

    def take(self) -> bytes:
        """Every frame waiting, in order, as one chunk (empty if none)."""
        frames = b"".join(self._frames)
        self._frames.clear()
        return frames


class ProgressHub:
    """Fans a runtime's ``ToolProgress`` events out to the streams of their session."""

    def __init__(self) -> None:
        # Keyed by session, not conversation: a stream opened before its session's first
        # message subscribes before the conversation exists, and misses none of its progress.
        self._subscribers: dict[SessionKey, set[ProgressSubscription]] = {}

    def __call__(self, event: EngineEvent) -> None:
        """The engine observer."""
        if not isinstance(event, ToolProgress):
            return
        subscribers = self._subscribers.get(event.correlation.session_key)
        if subscribers:
            frame = progress_frame(event)
            for subscription in subscribers:
                subscription.put(frame)

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
