"""Tasks and cancellation: stopping a task for sure, and finishing what must not be cut.

On Python 3.11, ``asyncio.wait_for`` can swallow a cancellation that arrives as the awaited
result does (fixed in 3.12); a library awaiting that way inside our task (psycopg's pool
does, to hand out a connection) then keeps the task running after ``cancel()``. So a stop
cancels again until the task is really done.

The other way round, some work must end whole even in a task being cancelled: handing a
connection back to a pool, say, which an SSE request's task does as its client leaves (and
anyio cancels such a task again at every await of its cleanup). ``finish`` runs it to its end
and then lets the cancellation go on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ("cancel_and_wait", "finish")

T = TypeVar("T")

_RECANCEL_SECONDS = 0.1


async def cancel_and_wait(task: asyncio.Task[object]) -> None:
    """Cancel ``task`` and wait until it is done, cancelling again if a cancel was lost."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=_RECANCEL_SECONDS)
    with contextlib.suppress(asyncio.CancelledError):
        task.result()  # retrieved, so the loop does not log it as never retrieved


async def finish(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile, however often;
    the cancellation is raised once it has ended.

    Example::

        try:
            yield conn
        finally:
            await finish(pool.putconn(conn))
    """
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait({task})  # waits, unlike wait_for, without cancelling the work
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled():
            task.exception()  # retrieved: the caller's cancellation is what it sees
        raise asyncio.CancelledError
    return task.result()
