"""Schedules at run time: ``GET /schedules`` lists them with their next window,
``POST /schedules`` keeps one in the store, ``DELETE /schedules/{id}`` forgets it."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import Field
from pydantic.alias_generators import to_camel

from tether.auth import Resource
from tether.engine import (
    MAX_CATCH_UP,
    MAX_PERIOD,
    InvalidSchedule,
    Schedule,
    ScheduleConflict,
    ScheduleInfo,
)
from tether.errors import Forbidden
from tether.http._access import AccessDependency, IdentityDependency
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, ApiError, failures
from tether.http._requests import RequestBody
from tether.http._responses import TIMESTAMP, WireResponse, optional, time_of

__all__ = ("ScheduleBody", "ScheduleDeleted", "ScheduleItem", "SchedulesPage", "schedules_router")


class ScheduleBody(RequestBody):
    """A schedule to keep (see docs/schedules.md): exactly one of ``cron`` and ``every``."""

    agent: str
    instance: str
    session: str = "default"
    body: str = Field(description="What each window sends: the signal's body, or the message.")
    cron: str | None = Field(
        default=None, description="Five fields (or six, seconds first), read in ``timezone``."
    )
    every: float | None = Field(
        default=None,
        gt=0,
        le=MAX_PERIOD,
        allow_inf_nan=False,
        description="Seconds; windows at multiples since the Unix epoch. At least the "
        "server's floor (``schedule_min_period``, 1 s by default), at most 366 days.",
    )
    timezone: str = Field(default="UTC", description="An IANA name (``Europe/Paris``).")
    kind: Literal["signal", "user"] = "signal"
    signal_type: str = Field(default="schedule", min_length=1, max_length=200)
    missed: Literal["skip", "catch_up"] = "skip"
    catch_up: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CATCH_UP,
        description="With missed=catch_up: at most this many missed windows.",
    )
    grace: float = Field(
        default=60.0,
        gt=0,
        le=MAX_PERIOD,
        allow_inf_nan=False,
        description="Seconds a window may be seen late.",
    )
    id: str | None = Field(
        default=None, description="Derived from the definition when absent.", max_length=150
    )

    def schedule(self) -> Schedule:
        try:
            return Schedule(
                self.agent,
                self.instance,
                session=self.session,
                body=self.body,
                cron=self.cron,
                every=self.every,
                timezone=self.timezone,
                kind=self.kind,
                signal_type=self.signal_type,
                missed=self.missed,
                catch_up=self.catch_up,
                grace=self.grace,
                id=self.id or "",
            )
        except InvalidSchedule as exc:  # its field as the wire names it
            field = to_camel(exc.field) if exc.field else None
            message = str(exc).removeprefix(f"{exc.field}: ")
            raise InvalidSchedule(message, field=field) from None


class ScheduleItem(WireResponse):
    """A schedule with where it is defined and the start of its next window."""

    id: str
    agent: str
    instance: str
    session: str
    cron: str | None = optional()
    every: float | None = optional()
    timezone: str
    kind: Literal["signal", "user"]
    body: str
    signal_type: str | None = optional()
    missed: Literal["skip", "catch_up"]
    catch_up: int | None = optional()
    grace: float
    source: Literal["config", "durable"] = Field(
        description="config: the runtime's own (not deleted here); durable: kept in the store."
    )
    next_fire_at: str | None = optional(**TIMESTAMP)
    created_at: str | None = optional(**TIMESTAMP)

    @classmethod
    def of(cls, info: ScheduleInfo) -> ScheduleItem:
        schedule = info.schedule
        return cls(
            id=schedule.id,
            agent=schedule.agent,
            instance=schedule.instance,
            session=schedule.session,
            cron=schedule.cron,
            every=schedule.every,
            timezone=schedule.timezone,
            kind=schedule.kind,
            body=schedule.body,
            signal_type=schedule.signal_type if schedule.kind == "signal" else None,
            missed=schedule.missed,
            catch_up=schedule.catch_up,
            grace=schedule.grace,
            source=info.source,
            next_fire_at=time_of(info.next_fire_at),
            created_at=time_of(info.created_at),
        )


class SchedulesPage(WireResponse):
    schedules: list[ScheduleItem]


class ScheduleDeleted(WireResponse):
    deleted: str = Field(description="The id of the schedule forgotten.")


def _conflict(exc: ScheduleConflict) -> ApiError:
    return ApiError(409, exc.code, str(exc), {"field": "id"})


schedules_router = APIRouter(tags=["schedules"])
"""The schedules' list, and adding and deleting one."""


@schedules_router.get("/schedules", responses=failures(503))
async def schedules(runtime: RuntimeDependency, identity: IdentityDependency) -> SchedulesPage:
    """Every schedule with the start of its next window: the runtime's configuration's,
    then those kept in the store (oldest first); a tenant's identity sees its own only."""
    listed = await runtime.schedules(tenant=identity.tenant)
    return SchedulesPage(
        schedules=[
            ScheduleItem.of(info) for info in listed if identity.may_use(info.schedule.agent)
        ]
    )


@schedules_router.post(
    "/schedules", status_code=201, responses=failures(*BODY_FAILURES, 404, 409, 503)
)
async def add(
    runtime: RuntimeDependency,
    access: AccessDependency,
    payload: ScheduleBody,
) -> ScheduleItem:
    """Keep a schedule in the store: every worker fires each of its windows once.
    The same definition again answers the one kept; an id that another definition (or
    the configuration) has is 409; an unknown agent 404."""
    identity = access.identity
    if not identity.may_use(payload.agent):
        raise Forbidden(f"{identity.name!r} may not use the agent {payload.agent!r}")
    schedule = payload.schedule()

    async def resource() -> Resource:  # a new one: no owner
        return Resource(
            "schedule",
            schedule.agent,
            schedule.instance,
            schedule.session,
            identity.tenant,
            schedule.id,
        )

    await access.check(resource)
    try:
        info = await runtime.add_schedule(schedule, tenant=identity.tenant)
    except ScheduleConflict as exc:
        raise _conflict(exc) from None
    return ScheduleItem.of(info)


@schedules_router.delete("/schedules/{schedule_id}", responses=failures(403, 404, 409, 422, 503))
async def delete(
    runtime: RuntimeDependency,
    access: AccessDependency,
    schedule_id: str,
) -> ScheduleDeleted:
    """Forget a schedule kept in the store (one of the configuration is 409). What its
    windows admitted stays admitted."""
    identity = access.identity
    if access.authorize is not None:
        listed = await runtime.schedules(tenant=identity.tenant)
        # One not this tenant's, or none: the delete answers 404 without asking.
        if found := next((info for info in listed if info.schedule.id == schedule_id), None):
            schedule, tenant = found.schedule, found.tenant

            async def resource() -> Resource:
                return Resource(
                    "schedule",
                    schedule.agent,
                    schedule.instance,
                    schedule.session,
                    tenant,
                    schedule_id,
                )

            await access.check(resource)
    try:
        await runtime.delete_schedule(schedule_id, tenant=identity.tenant)
    except ScheduleConflict as exc:
        raise _conflict(exc) from None
    return ScheduleDeleted(deleted=schedule_id)
