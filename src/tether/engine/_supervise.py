"""Supervision of a run's work: the lease renewed every heartbeat, and the work stopped on a
lost lease, an abort, the deadline or a shutdown.

Stopped work gets ``timeout_grace`` to unwind. Work that ignores its cancellation is kept as
a zombie until it ends; its claim is settled over with a fresh fence, so it can never write.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Any

from tether.engine._context import EngineContext
from tether.engine._lease import Lease
from tether.engine._runs import Stop
from tether.errors import ClaimLost, TetherError
from tether.store import Submission

__all__ = ("supervise",)


async def supervise(
    context: EngineContext,
    submission: Submission,
    work: asyncio.Task[Any],
    stop: Stop,
    *,
    lease: Lease,
    deadline: datetime,
) -> None:
    """Return once ``work`` is done, or stopped (``stop.reason`` says why)."""
    config, clock = context.config, context.clock
    interval = config.heartbeat_interval
    while not work.done():
        remaining = (deadline - clock.now()).total_seconds()
        waits = {work, context.runs.shutdown_signal(submission.id)}
        await clock.wait(waits, max(0.0, min(interval, remaining)))
        if work.done():
            break
        if context.closing:
            stop.reason = "shutdown"
        elif stop.reason is None and clock.now() >= deadline:
            stop.reason = "timeout"
        elif stop.reason is None:
            try:
                renewed = await lease.renew()
            except ClaimLost:
                stop.reason = "lease_lost"
            except TetherError:
                continue  # a store hiccup: the lease still has two renewals of slack
            else:
                if renewed.cancel_requested_at is not None:
                    stop.reason = "aborted"
                # Its model call's reservation of its tenant's budget lives as its claim
                # does, whatever the claim loop is doing (docs/budgets.md).
                with contextlib.suppress(TetherError):
                    await context.tenant_budgets.renew()
        if stop.reason is not None:
            break
    if not work.done():
        work.cancel()
        await clock.wait({work}, config.timeout_grace)
        if not work.done():  # it ignores cancellation: settle over it with a fresh fence
            context.runs.adopt_zombie(work)
