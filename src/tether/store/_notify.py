"""In-process wake-ups for tailers of a conversation, safe to fire from any thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator

__all__ = ("AppendNotifier", "wait_for_head")


class _Listener:
    __slots__ = ("event", "loop")

    def __init__(self, event: asyncio.Event | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        self.event = event if event is not None else asyncio.Event()

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the listener's loop is already closed
            self.loop.call_soon_threadsafe(self.event.set)


class AppendNotifier:
    """Registry of listeners per conversation; ``notify`` wakes them after a commit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, set[_Listener]] = {}

    @contextlib.contextmanager
    def listen(
        self, conversation_id: str, event: asyncio.Event | None = None
    ) -> Iterator[asyncio.Event]:
        """Register before reading the head, so an append in between is never missed.
        ``event`` (default: a new one) is what a notification sets."""
        listener = _Listener(event)
        with self._lock:
            self._listeners.setdefault(conversation_id, set()).add(listener)
        try:
            yield listener.event
        finally:
            with self._lock:
                listeners = self._listeners.get(conversation_id)
                if listeners is not None:
                    listeners.discard(listener)
                    if not listeners:
                        del self._listeners[conversation_id]

    def notify_all(self) -> None:
        """Wake every listener (a change feed reconnected: anything may have happened)."""
        with self._lock:
            woken = [listener for group in self._listeners.values() for listener in group]
        for listener in woken:
            listener.wake()

    def notify(self, conversation_ids: Iterable[str]) -> None:
        with self._lock:
            woken = [
                listener
                for conversation_id in conversation_ids
                for listener in self._listeners.get(conversation_id, ())
            ]
        for listener in woken:
            listener.wake()


async def wait_for_head(
    notifier: AppendNotifier,
    conversation_id: str,
    read_head: Callable[[], Awaitable[int]],
    *,
    after_seq: int,
    poll_interval: float | None,
) -> int:
    """Wait until ``read_head()`` passes ``after_seq``; return the new head.

    Local appends wake the waiter at once; ``poll_interval`` re-reads the head for
    appends made by other processes, which no in-process notification can see.
    Callers bound the wait with ``asyncio.timeout``.
    """
    while True:
        with notifier.listen(conversation_id) as appended:
            head = await read_head()
            if head > after_seq:
                return head
            if poll_interval is None:
                await appended.wait()
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(appended.wait(), poll_interval)
