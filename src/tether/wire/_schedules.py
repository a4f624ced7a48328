"""What the schedules routes take and answer: a schedule to keep, a listed schedule with its
next window, what a delete forgot."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from tether._limits import MAX_CATCH_UP, MAX_PERIOD
from tether.wire._base import TIMESTAMP, RequestBody, WireResponse, optional

__all__ = (
    "ScheduleBody",
    "ScheduleDeleted",
    "ScheduleItem",
    "SchedulesPage",
)


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


class SchedulesPage(WireResponse):
    schedules: list[ScheduleItem]


class ScheduleDeleted(WireResponse):
    deleted: str = Field(description="The id of the schedule forgotten.")
