"""Schedules at run time: ``GET /schedules`` lists them with their next window,
``POST /schedules`` keeps one in the store, ``DELETE /schedules/{id}`` forgets it."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic.alias_generators import to_camel

from tether.auth import Resource
from tether.engine import (
    InvalidSchedule,
    Schedule,
    ScheduleConflict,
    ScheduleInfo,
)
from tether.errors import Forbidden
from tether.http._access import AccessDependency, IdentityDependency
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, ApiError, failures
from tether.http._responses import time_of
from tether.wire import ScheduleBody, ScheduleDeleted, ScheduleItem, SchedulesPage

__all__ = (
    "schedule_item",
    "schedule_of",
    "schedules_router",
)


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
        schedules=[schedule_item(info) for info in listed if identity.may_use(info.schedule.agent)]
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
    schedule = schedule_of(payload)

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
    return schedule_item(info)


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


def schedule_of(body: ScheduleBody) -> Schedule:
    try:
        return Schedule(
            body.agent,
            body.instance,
            session=body.session,
            body=body.body,
            cron=body.cron,
            every=body.every,
            timezone=body.timezone,
            kind=body.kind,
            signal_type=body.signal_type,
            missed=body.missed,
            catch_up=body.catch_up,
            grace=body.grace,
            id=body.id or "",
        )
    except InvalidSchedule as exc:  # its field as the wire names it
        field = to_camel(exc.field) if exc.field else None
        message = str(exc).removeprefix(f"{exc.field}: ")
        raise InvalidSchedule(message, field=field) from None


def schedule_item(info: ScheduleInfo) -> ScheduleItem:
    schedule = info.schedule
    return ScheduleItem(
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
