"""The engine's sense of time: leases, heartbeats, ticks, deadlines and backoffs all ask it.

The :class:`SystemClock` is the wall and the event loop. A test hands the runtime a
:class:`ManualClock` instead and moves time forward with :meth:`ManualClock.advance`, so a
lease expires or a deadline passes when the test says so, not after a real wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, runtime_checkable

__all__ = ("Clock", "ManualClock", "SystemClock")


@runtime_checkable
class Clock(Protocol):
    """What the engine measures time with.

    ``now`` is the wall time stored with leases and deadlines; ``monotonic`` measures
    intervals; ``wait`` and ``wait_event`` block for at most ``seconds`` of this
    clock's time.
    """

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    async def wait(self, waits: Iterable[asyncio.Future[Any]], seconds: float) -> None:
        """Return once one of ``waits`` is done, or ``seconds`` have passed."""
        ...

    async def wait_event(self, event: asyncio.Event, seconds: float) -> None:
        """Return once ``event`` is set, or ``seconds`` have passed."""
        ...


class SystemClock:
    """Real time: the wall clock and the running event loop's timers."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def call_later(self, seconds: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        """Call ``callback`` once ``seconds`` have passed, unless cancelled first: what a
        model call's timeout is measured with (a clock without it: the event loop's)."""
        return asyncio.get_running_loop().call_later(seconds, callback)

    async def wait(self, waits: Iterable[asyncio.Future[Any]], seconds: float) -> None:
        await asyncio.wait(set(waits), timeout=max(0.0, seconds), return_when="FIRST_COMPLETED")

    async def wait_event(self, event: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, seconds)):
                await event.wait()


class ManualClock:
    """Time that moves only when told: :meth:`advance` fires every timer it passes. It
    starts at ``start`` (the wall time when it is made, by default).

    Example::

        clock = ManualClock()
        runtime = Runtime(agents, store, clock=clock, lease=30)
        ...
        await clock.advance(31)  # the lease of a stalled run has expired now
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._wall = start or datetime.now(UTC)
        self._elapsed = 0.0
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> datetime:
        return self._wall + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        return self._elapsed

    @property
    def pending(self) -> int:
        """Timers still waiting for time to pass (a test can wait until the engine sleeps)."""
        return sum(not future.done() for _, _, future in self._timers)

    def _timer(self, seconds: float) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if seconds <= 0:
            future.set_result(None)
        else:
            heapq.heappush(self._timers, (self._elapsed + seconds, next(self._order), future))
        return future

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking every wait that ends by then, in order of its end."""
        until = self._elapsed + seconds
        while self._timers and self._timers[0][0] <= until:
            at, _, future = heapq.heappop(self._timers)
            self._elapsed = max(self._elapsed, at)
            if not future.done():
                future.set_result(None)
                await asyncio.sleep(0)  # let the woken task run before time moves on
        self._elapsed = until
        await asyncio.sleep(0)

    async def sleep(self, seconds: float) -> None:
        timer = self._timer(seconds)
        try:
            await timer
        finally:
            timer.cancel()

    def call_later(self, seconds: float, callback: Callable[[], None]) -> asyncio.Future[None]:
        """Call ``callback`` once time has been moved ``seconds`` on, unless the returned
        timer is cancelled first (a model call's timeout fires when the test says so)."""
        timer = self._timer(seconds)
        timer.add_done_callback(lambda done: None if done.cancelled() else callback())
        return timer

    async def wait(self, waits: Iterable[asyncio.Future[Any]], seconds: float) -> None:
        timer = self._timer(seconds)
        try:
            await asyncio.wait({*waits, timer}, return_when="FIRST_COMPLETED")
        finally:
            timer.cancel()

    async def wait_event(self, event: asyncio.Event, seconds: float) -> None:
        if event.is_set():
            return
        waiter = asyncio.ensure_future(event.wait())
        try:
            await self.wait({waiter}, seconds)
        finally:
            waiter.cancel()
            await asyncio.wait({waiter})
