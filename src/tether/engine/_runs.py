"""The runs of this process and who waits on them: the engine's wake-up hub.

Attempts register here while they run; an abort or a shutdown wakes them through it, and a
settlement made here is handed to this process's waiters without a store read.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import JsonValue

from tether.store import ChangeFeed, Store, SubmissionStatus

__all__ = ("RunRegistry", "Stop", "StopReason", "wait_settled")

StopReason = Literal["lease_lost", "aborted", "timeout", "shutdown"]


@dataclass
class Stop:
    """Why a run's supervisor stopped its work, once it has (``None`` while it may go on)."""

    reason: StopReason | None = None


@dataclass(slots=True)
class _Run:
    task: asyncio.Task[Any]
    stop: Stop
    wake: asyncio.Future[None]


class RunRegistry:
    """Runs in progress by submission id, settlement waiters, and the runs that outlived
    their cancellation (kept until they end)."""

    def __init__(self) -> None:
        self.closing = False
        """Set once the runtime shuts down: no new claims, running work is released."""
        self._runs: dict[str, _Run] = {}
        self._starting: set[str] = set()
        """Claimed here, their work not registered yet (the attempt is being set up)."""
        self._aborted_early: set[str] = set()
        """Of those, the ones an in-process abort was asked for before their work was
        registered: their run stops as soon as it is (the claim's copy of the submission
        predates the cancel, and on a manual clock no heartbeat would read it)."""
        self._settled: dict[str, asyncio.Future[dict[str, JsonValue]]] = {}
        self._waiting: dict[str, int] = {}  # waiters in progress, by submission id
        self._zombies: set[asyncio.Task[Any]] = set()
        self.claims = asyncio.Event()
        """Set when there may be work to claim here (the coordinator's wake-up)."""
        self.next_due: datetime | None = None
        """The earliest time something is due that this process knows of (a timer it parked,
        a delayed dispatch it admitted, or the store's ``next_due``): the claim loop sleeps
        no longer than until then, and releases what is due at it."""

    def wake_claims(self) -> None:
        """Tell this process's coordinator to look for work now (say, a child just admitted)."""
        self.claims.set()

    def due(self, when: datetime) -> None:
        """Something is due at ``when`` (a timer, a delayed dispatch): the claim loop looks
        again now, to sleep no longer than until then."""
        if self.next_due is None or when < self.next_due:
            self.next_due = when
            self.claims.set()

    def __contains__(self, submission_id: object) -> bool:
        return submission_id in self._runs

    @property
    def running(self) -> int:
        """The attempts running in this process now (their work registered)."""
        return len(self._runs)

    def starting(self, submission_id: str) -> None:
        """A run of ``submission_id`` was claimed here and is being set up: an abort asked
        for before its work is registered is kept for it (:meth:`register`)."""
        self._starting.add(submission_id)

    def finished(self, submission_id: str) -> None:
        """The run claimed here is over (or never got as far as its work)."""
        self._starting.discard(submission_id)
        self._aborted_early.discard(submission_id)

    def register(self, submission_id: str, task: asyncio.Task[Any], stop: Stop) -> None:
        loop = asyncio.get_running_loop()
        run = _Run(task, stop, loop.create_future())
        self._runs[submission_id] = run
        if submission_id in self._aborted_early:
            self._aborted_early.discard(submission_id)
            stop.reason = "aborted"
            run.wake.set_result(None)

    def unregister(self, submission_id: str) -> None:
        self._runs.pop(submission_id, None)

    def shutdown_signal(self, submission_id: str) -> asyncio.Future[None]:
        """Resolves when this run should stop now (shutdown or an in-process abort)."""
        return self._runs[submission_id].wake

    def abort(self, submission_id: str) -> None:
        """Stop a run of this process now, if one runs (it settles ``aborted``)."""
        run = self._runs.get(submission_id)
        if run is None and submission_id in self._starting:
            self._aborted_early.add(submission_id)
        if run is not None:
            run.stop.reason = "aborted"
            if not run.wake.done():
                run.wake.set_result(None)

    def close(self) -> None:
        """Mark the runtime closing and wake every run to give its claim back."""
        self.closing = True
        for run in self._runs.values():
            if not run.wake.done():
                run.wake.set_result(None)

    async def bury_zombies(self, grace: float) -> None:
        """Cancel the runs that outlived their cancellation; wait ``grace`` for them to end."""
        for zombie in self._zombies:
            zombie.cancel()
        if self._zombies:
            await asyncio.wait(self._zombies, timeout=grace)

    def adopt_zombie(self, task: asyncio.Task[Any]) -> None:
        """Keep a run that ignored its cancellation until it ends; whatever it raises then is
        moot (its work was settled over it) and is retrieved, not logged as never retrieved."""
        self._zombies.add(task)
        task.add_done_callback(self._bury)

    def _bury(self, task: asyncio.Task[Any]) -> None:
        self._zombies.discard(task)
        if not task.cancelled():
            task.exception()

    # --- settlement waiters -----------------------------------------------------------

    @property
    def waiters(self) -> int:
        """Waiters and shared futures held (none once every waiter has left)."""
        return len(self._settled) + len(self._waiting)

    def notify_settled(self, submission_id: str, settlement: Mapping[str, JsonValue]) -> None:
        """Hand a just-finalized settlement to in-process waiters (others poll the store)."""
        waiter = self._settled.pop(submission_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(dict(settlement))

    def settlement_waiter(self, submission_id: str) -> asyncio.Future[dict[str, JsonValue]]:
        """The future a settlement made here resolves (shared by the submission's waiters)."""
        waiter = self._settled.get(submission_id)
        if waiter is None or waiter.done():
            waiter = asyncio.get_running_loop().create_future()
            self._settled[submission_id] = waiter
        return waiter

    def join(self, submission_id: str) -> None:
        """A waiter of ``submission_id`` arrives; each :meth:`join` needs a :meth:`leave`."""
        self._waiting[submission_id] = self._waiting.get(submission_id, 0) + 1

    def leave(self, submission_id: str) -> None:
        """A waiter leaves, however (settled, unknown id, timed out): the last one out
        removes the shared future."""
        left = self._waiting.pop(submission_id) - 1
        if left:
            self._waiting[submission_id] = left
        else:
            self._settled.pop(submission_id, None)


_WAIT_POLL = 0.25


async def wait_settled(
    store: Store, feed: ChangeFeed | None, runs: RunRegistry, submission_id: str
) -> dict[str, JsonValue]:
    """The settled payload of a submission, once it settles (``Runtime.wait``): read from
    the store, woken by its change feed if it has one (else polled), or handed over by an
    attempt of this process without a store read."""
    # Waiters of one submission share its future; the last one out removes it, however
    # it leaves (settled, unknown id, timed out, or on a node that runs no attempts).
    runs.join(submission_id)
    try:
        while True:
            waiter = runs.settlement_waiter(submission_id)
            woken = asyncio.Event()
            wake = functools.partial(_set_event, woken)
            waiter.add_done_callback(wake)
            try:
                with (
                    feed.listen(f"settled:{submission_id}", woken)
                    if feed is not None
                    else contextlib.nullcontext()
                ):
                    submission = await store.get_submission(submission_id)
                    if (
                        submission.status is SubmissionStatus.SETTLED
                        and submission.settlement is not None
                    ):
                        return dict(submission.settlement)
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(_WAIT_POLL):
                            await woken.wait()
            finally:
                waiter.remove_done_callback(wake)
            if not waiter.done() and submission_id in runs:
                # Its attempt runs here and hands the settlement over once it has
                # finished: a change feed's wake-up at the commit need not send us to
                # the store for it.
                await asyncio.wait({waiter}, timeout=_WAIT_POLL)
            if waiter.done() and not waiter.cancelled():
                return dict(waiter.result())  # settled in this process: the payload is here
    finally:
        runs.leave(submission_id)


def _set_event(event: asyncio.Event, _: object) -> None:
    event.set()
