"""Stopping a task for sure.

On Python 3.11, ``asyncio.wait_for`` can swallow a cancellation that arrives as the awaited
result does (fixed in 3.12); a library awaiting that way inside our task (psycopg's pool
does, to hand out a connection) then keeps the task running after ``cancel()``. So a stop
cancels again until the task is really done.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ("cancel_and_wait",)

_RECANCEL_SECONDS = 0.1


async def cancel_and_wait(task: asyncio.Task[object]) -> None:
    """Cancel ``task`` and wait until it is done, cancelling again if a cancel was lost."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=_RECANCEL_SECONDS)
    with contextlib.suppress(asyncio.CancelledError):
        task.result()  # retrieved, so the loop does not log it as never retrieved
