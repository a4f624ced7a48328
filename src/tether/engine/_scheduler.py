"""Firing schedules: a worker's task that admits each window of every schedule once.

Every worker runtime runs a :class:`Scheduler` beside its coordinator. A pass lists the
schedules (the runtime's configuration's and the store's durable ones, so one added on
another node is picked up within ``schedule_poll``), and for each admits what is due with
the window's own dispatch id (see :meth:`Schedule.dispatch_id`): the session admits a window
once, however many workers fire it and however often they restart. Passes run at each
window's start and at least every ``schedule_poll`` seconds, on the runtime's clock.

What is due at a pass at time ``now``, for a schedule whose latest window starts at
``L <= now``: ``L`` if no pass of this worker handled it yet and ``now - L <= grace``
(on time); the windows before ``L`` that this worker never handled (it was not running, or
they came and went between two passes), and ``L`` itself when late, are missed: dropped
with ``missed="skip"``, with ``missed="catch_up"`` the latest ``catch_up`` of them fired,
oldest first. A durable schedule never fires a window that started before it was added.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from tether._tasks import cancel_and_wait
from tether.engine._clock import Clock
from tether.engine._inbound import Inbound
from tether.engine._schedules import (
    MAX_PERIOD,
    Schedule,
    ScheduleConflict,
    ScheduleInfo,
    ScheduleNotFound,
    window_name,
)
from tether.errors import (
    ConversationNotFound,
    DispatchConflict,
    InvalidDispatch,
    TetherError,
    UnknownAgent,
)
from tether.store import ScheduleRow, ScheduleStore

__all__ = ("ScheduleBook", "Scheduler")

logger = logging.getLogger("tether.engine")

_MICROSECOND = timedelta(microseconds=1)


class _Receipt(Protocol):
    @property
    def submission_id(self) -> str: ...

    @property
    def created(self) -> bool: ...


class Dispatch(Protocol):
    """``Runtime.dispatch``, as the scheduler calls it."""

    async def __call__(
        self,
        agent: str,
        instance: str,
        message: Inbound,
        *,
        session: str,
        dispatch_id: str,
        tenant: str | None,
    ) -> _Receipt: ...


class ScheduleBook:
    """A runtime's schedules: those of its configuration (fixed for its life) and the
    durable ones its store keeps (added and deleted at run time, by any node)."""

    def __init__(
        self,
        configured: Sequence[Schedule],
        agents: Collection[str],
        *,
        clock: Clock,
        poll: float = 1.0,
        min_period: float = 1.0,
    ) -> None:
        if not poll > 0:
            raise ValueError(f"schedule_poll must be a positive number of seconds, not {poll}")
        if not 0 < min_period <= MAX_PERIOD:
            raise ValueError(
                f"schedule_min_period must be a positive number of seconds, not {min_period}"
            )
        self.poll = poll
        """How often a worker lists the store's schedules."""
        self.min_period = min_period
        """The closest two windows of one schedule may be: a schedule cannot flood a store."""
        self.clock = clock
        """Whose time a cron expression's gaps are sampled from."""
        self.configured: dict[str, Schedule] = {}
        for schedule in configured:
            if not isinstance(schedule, Schedule):
                raise TypeError(f"schedules holds a {type(schedule).__name__}, not a Schedule")
            if schedule.agent not in agents:
                raise UnknownAgent(schedule.agent)
            schedule.check_period(min_period, now=clock.now())
            if schedule.id in self.configured:
                raise ValueError(f"two schedules of the configuration have the id {schedule.id!r}")
            self.configured[schedule.id] = schedule
        self.agents = agents
        self._unreadable: set[str] = set()

    async def durable(
        self, store: ScheduleStore, tenant: str | None = None
    ) -> list[tuple[Schedule, datetime, str | None]]:
        """The store's schedules (``tenant``'s only, if given) that this version can read,
        with when each was added and its tenant, oldest first (an unreadable row is logged
        once and left alone)."""
        kept: list[tuple[Schedule, datetime, str | None]] = []
        for row in await store.list_schedules(tenant=tenant):
            try:
                schedule = Schedule.from_json(row.definition)
                if schedule.id != row.id:
                    raise ValueError(f"its definition names {schedule.id!r}")
                # kept by an older version, say
                schedule.check_period(self.min_period, now=self.clock.now())
            except ValueError as exc:
                if row.id not in self._unreadable:
                    self._unreadable.add(row.id)
                    logger.warning("schedule %s cannot be read (%s): it does not fire", row.id, exc)
                continue
            kept.append((schedule, row.created_at, row.tenant))
        return kept

    async def list(
        self, store: ScheduleStore, now: datetime, tenant: str | None = None
    ) -> list[ScheduleInfo]:
        """Every schedule with its next window's start: the configuration's, then the
        durable ones, oldest first; with ``tenant``, only the durable ones of that tenant."""
        infos = (
            [ScheduleInfo(s, "config", s.next_after(now)) for s in self.configured.values()]
            if tenant is None
            else []
        )
        for schedule, created_at, owner in await self.durable(store, tenant):
            if schedule.id not in self.configured:
                infos.append(
                    ScheduleInfo(schedule, "durable", schedule.next_after(now), created_at, owner)
                )
        return infos

    async def add(
        self, store: ScheduleStore, schedule: Schedule, now: datetime, tenant: str | None = None
    ) -> ScheduleInfo:
        """Keep ``schedule`` in the store, ``tenant``'s (idempotent for the same definition
        and tenant)."""
        if schedule.agent not in self.agents:
            raise UnknownAgent(schedule.agent)
        schedule.check_period(self.min_period, now=self.clock.now())
        if schedule.id in self.configured:
            raise ScheduleConflict(schedule.id, "is a schedule of the runtime's configuration")
        try:
            kept = await store.put_schedule(
                ScheduleRow(schedule.id, schedule.to_json(), now, tenant)
            )
        except DispatchConflict:
            raise ScheduleConflict(schedule.id, "is taken by another definition") from None
        return ScheduleInfo(
            schedule, "durable", schedule.next_after(now), kept.created_at, kept.tenant
        )

    async def delete(
        self, store: ScheduleStore, schedule_id: str, tenant: str | None = None
    ) -> None:
        """Forget a durable schedule (with ``tenant``, only one of that tenant's: another's
        is not found): its windows stop firing (within ``schedule_poll`` on the other
        workers)."""
        if schedule_id in self.configured and tenant is None:
            raise ScheduleConflict(
                schedule_id, "is a schedule of the runtime's configuration: remove it there"
            )
        if tenant is not None and schedule_id not in {
            row.id for row in await store.list_schedules(tenant=tenant)
        }:
            raise ScheduleNotFound(schedule_id)
        if not await store.delete_schedule(schedule_id):
            raise ScheduleNotFound(schedule_id)


class Scheduler:
    """The task that fires a worker's schedules (see the module's doc)."""

    def __init__(
        self,
        book: ScheduleBook,
        store: ScheduleStore,
        clock: Clock,
        dispatch: Dispatch,
    ) -> None:
        self.book = book
        self.store = store
        self.clock = clock
        self.dispatch = dispatch
        self.wake = asyncio.Event()
        """Set to look again now (a schedule was added in this process)."""
        self._handled: dict[str, tuple[Schedule, datetime]] = {}
        """The latest window handled of each schedule, with the definition it was of."""
        self._warned: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="tether-scheduler")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _loop(self) -> None:
        while True:
            wake_at: datetime | None = None
            try:
                wake_at = await self.tick()
            except TetherError:
                logger.exception("schedule pass failed; retrying")
            delay = self.book.poll
            if wake_at is not None:
                delay = min(delay, (wake_at - self.clock.now()).total_seconds())
            if delay > 0:  # else a window started during the pass: look again at once
                await self.clock.wait_event(self.wake, delay)
            self.wake.clear()

    async def tick(self) -> datetime | None:
        """One pass: fire what is due; the next window's start of any schedule."""
        now = self.clock.now()
        due: list[tuple[Schedule, datetime | None, str | None]] = [
            (schedule, None, None) for schedule in self.book.configured.values()
        ]
        for schedule, created_at, tenant in await self.book.durable(self.store):
            if schedule.id in self.book.configured:
                self._warn(schedule.id, "is also a schedule of this runtime's configuration")
            else:  # nothing that started before it was added
                due.append((schedule, created_at - _MICROSECOND, tenant))
        current = {schedule.id for schedule, _, _ in due}
        for gone in set(self._handled) - current:
            del self._handled[gone]
        upcoming: list[datetime] = []
        for schedule, lower, tenant in due:
            if schedule.agent not in self.book.agents:
                self._warn(schedule.id, f"names the agent {schedule.agent!r}, unknown here")
                continue
            await self._fire_due(schedule, lower, now, tenant)
            following = schedule.next_after(now)
            if following is not None:
                upcoming.append(following)
        return min(upcoming, default=None)

    async def _fire_due(
        self, schedule: Schedule, lower: datetime | None, now: datetime, tenant: str | None
    ) -> None:
        latest = schedule.latest(now)
        handled = self._handled.get(schedule.id)
        cursor = handled[1] if handled is not None and handled[0] == schedule else lower
        if latest is None or (cursor is not None and latest <= cursor):
            return
        on_time = now - latest <= timedelta(seconds=schedule.grace)
        windows = [latest] if on_time else []
        if schedule.missed == "catch_up":
            assert schedule.catch_up is not None  # checked by Schedule
            late = [] if on_time else [latest]
            earlier = schedule.before(latest, schedule.catch_up - len(late), cursor)
            windows = [*earlier, *late, *windows]
        elif not on_time:
            logger.info(
                "schedule %s: window %s missed (seen %s late), skipped",
                schedule.id,
                window_name(latest),
                now - latest,
            )
        for start in windows:
            if not await self._fire(schedule, start, tenant):
                return  # not admitted: the next pass tries again
        self._handled[schedule.id] = (schedule, latest)

    async def _fire(self, schedule: Schedule, start: datetime, tenant: str | None) -> bool:
        """Admit one window, as ``tenant``'s; whether it is done with (admitted now or
        before, or refused for good: a session of another tenant too), rather than worth
        another try."""
        try:
            receipt = await self.dispatch(
                schedule.agent,
                schedule.instance,
                schedule.inbound(start),
                session=schedule.session,
                dispatch_id=schedule.dispatch_id(start),
                tenant=tenant,
            )
        except (ConversationNotFound, DispatchConflict, InvalidDispatch, UnknownAgent) as exc:
            logger.warning(
                "schedule %s: window %s refused: %s", schedule.id, window_name(start), exc
            )
            return True
        except TetherError as exc:
            logger.warning(
                "schedule %s: window %s not admitted yet: %s", schedule.id, window_name(start), exc
            )
            return False
        if receipt.created:
            logger.info(
                "schedule %s: window %s fired as submission %s",
                schedule.id,
                window_name(start),
                receipt.submission_id,
                extra={"submission_id": receipt.submission_id, "schedule_id": schedule.id},
            )
        return True

    def _warn(self, schedule_id: str, problem: str) -> None:
        if schedule_id not in self._warned:
            self._warned.add(schedule_id)
            logger.warning("schedule %s %s: it does not fire here", schedule_id, problem)
