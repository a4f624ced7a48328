"""Time passing on a test's :class:`ManualClock`, for what only time ends (a lease, a wait's
deadline, the sweep a lease apart)."""

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from tether.engine import ManualClock

T = TypeVar("T")


async def advance_until(clock: ManualClock, done: Awaitable[T], step: float) -> T:
    """Move ``clock`` on ``step`` at a time until ``done`` is, and return its result. Between
    two moves the engine's tasks run (and wait on the store): ``done`` is awaited for a real
    moment each time, so time never races ahead of the work it is meant to pace."""
    task = asyncio.ensure_future(done)
    try:
        async with asyncio.timeout(60):  # room for a loaded machine, under the test timeout
            while not task.done():
                await clock.advance(step)
                await asyncio.wait({task}, timeout=0.01)
        return task.result()
    finally:
        task.cancel()
