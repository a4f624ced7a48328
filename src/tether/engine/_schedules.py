"""Durable schedules: what fires when, and which dispatch each window becomes.

A :class:`Schedule` names a session and when to write into it: a cron expression (read by
``cronsim``, in the schedule's IANA time zone) or a fixed period (``every`` seconds, windows
aligned to the Unix epoch). Each window's start names its dispatch,
``schedule:<id>:<start, RFC 3339 UTC>``, so however many workers fire it, and however often
one restarts, the session admits it once (a dispatch id is idempotent per session key).

Daylight saving time is cronsim's (Debian cron's): an expression at a fixed minute and hour
(``30 2 * * *``) whose local time does not exist that day fires at the first minute after
the gap (03:00); one whose local time happens twice fires once, at the first. An expression
with a wildcard minute or hour (``*/15 * * * *``) follows real time: nothing fires in the
skipped hour, and the repeated hour fires in both of its passes.

Example::

    Schedule("digest", "acme", cron="0 9 * * MON-FRI", timezone="Europe/Paris",
             body="Send the daily digest")
    Schedule("monitor", "site", every=300, kind="user", body="Check the site",
             missed="catch_up", catch_up=3)
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from tether._limits import MAX_CATCH_UP, MAX_PERIOD
from tether.engine._inbound import Inbound, SignalInfo
from tether.errors import InvalidDispatch, NotFound, TetherError

__all__ = (
    "MAX_CATCH_UP",
    "MAX_PERIOD",
    "InvalidSchedule",
    "Missed",
    "Schedule",
    "ScheduleConflict",
    "ScheduleInfo",
    "ScheduleKind",
    "ScheduleNotFound",
    "ScheduleSource",
    "window_name",
)

ScheduleKind = Literal["signal", "user"]
Missed = Literal["skip", "catch_up"]
ScheduleSource = Literal["config", "durable"]
_GAPS_SAMPLED = 64
"""Windows of a cron expression whose gaps are checked against a runtime's floor."""
_NAME_LIMIT = 200
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,149}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""Where ``every`` counts its windows from, and where a cron expression is checked to fire at
all: it has no year field, so it fires after any instant if it fires after one (cronsim looks
50 years on, past the calendar's 28-year cycle): a definition is valid or not whatever the
time, with no clock read."""
_MICROSECOND = timedelta(microseconds=1)


class InvalidSchedule(InvalidDispatch):
    """A schedule that cannot be kept: a bad cron expression, an unknown time zone, both or
    neither of ``cron`` and ``every``... ``field`` names the culprit. A ``ValueError``."""

    code = "invalid_schedule"


class ScheduleNotFound(NotFound):
    """No schedule has this id."""

    code = "schedule_not_found"

    def __init__(self, schedule_id: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(f"no schedule {schedule_id!r}")


class ScheduleConflict(TetherError):
    """The id is taken by another definition, or names a schedule of the runtime's
    configuration (which only a change of configuration adds or removes)."""

    code = "schedule_conflict"

    def __init__(self, schedule_id: str, reason: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(f"schedule {schedule_id!r} {reason}")


def window_name(start: datetime) -> str:
    """A window's start as RFC 3339 UTC (``2026-12-02T09:00:00Z``; microseconds if any)."""
    utc = start.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}"
    return text + "Z"


def _check_name(what: str, value: object) -> None:
    if (
        not isinstance(value, str)
        or not value
        or len(value) > _NAME_LIMIT
        or "/" in value
        or not value.isprintable()
    ):
        raise InvalidSchedule(
            f"must be 1-{_NAME_LIMIT} printable characters without '/'", field=what
        )


def _positive(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidSchedule("must be a number of seconds", field=what)
    if not math.isfinite(value) or value <= 0:
        raise InvalidSchedule("must be a positive number of seconds", field=what)
    if value > MAX_PERIOD:
        raise InvalidSchedule(f"must be at most 366 days ({MAX_PERIOD} s)", field=what)
    return float(value)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A session written to on a schedule (see the module's doc for the windows and DST).

    Exactly one of ``cron`` (5 fields, or 6 with seconds first, in ``timezone``) and
    ``every`` (seconds; windows at whole multiples since the Unix epoch, UTC) says when.
    Each window admits ``body`` into ``agent/instance/session``: a signal of type
    ``signal_type`` (its sender ``{"schedule": id}``, its tag the window's start), or with
    ``kind="user"`` a user message.

    A window fires if a worker sees it while it is the latest one and at most ``grace``
    seconds after its start (workers look at each window's start and at least every
    ``schedule_poll``). The others are missed: ``missed="skip"`` drops them,
    ``missed="catch_up"`` fires up to ``catch_up`` of them, the latest ones, oldest first
    (as soon as a worker sees them). ``id`` is derived from the definition unless given, so
    a schedule of a runtime's configuration keeps its id across restarts.

    Every field is checked here: a bad one raises :class:`InvalidSchedule` (a
    ``ValueError``) naming it.
    """

    agent: str
    instance: str
    _: KW_ONLY
    body: str
    session: str = "default"
    cron: str | None = None
    every: float | None = None
    timezone: str = "UTC"
    kind: ScheduleKind = "signal"
    signal_type: str = "schedule"
    missed: Missed = "skip"
    catch_up: int | None = None
    grace: float = 60.0
    id: str = ""
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("agent", "instance", "session"):
            _check_name(name, getattr(self, name))
        if not isinstance(self.body, str) or not self.body:
            raise InvalidSchedule("is required", field="body")
        if (self.cron is None) == (self.every is None):
            raise InvalidSchedule("give exactly one of cron and every", field="cron")
        object.__setattr__(self, "_zone", _zone(self.timezone))
        if self.cron is not None:
            _check_cron(self.cron, self._zone)
        else:
            every = _positive("every", self.every)
            if round(every * 1e6) < 1:
                raise InvalidSchedule("must be at least a microsecond", field="every")
            object.__setattr__(self, "every", every)
            if self.timezone != "UTC":
                raise InvalidSchedule(
                    "goes with cron only: every counts from the Unix epoch in UTC",
                    field="timezone",
                )
        if self.kind not in ("signal", "user"):
            raise InvalidSchedule("must be signal or user", field="kind")
        if not isinstance(self.signal_type, str) or not 0 < len(self.signal_type) <= 200:
            raise InvalidSchedule("must be 1-200 characters", field="signal_type")
        if self.kind == "user" and self.signal_type != "schedule":
            raise InvalidSchedule("goes with kind='signal'", field="signal_type")
        self._check_missed()
        object.__setattr__(self, "grace", _positive("grace", self.grace))
        if not self.id:
            object.__setattr__(self, "id", self._derived_id())
        elif not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise InvalidSchedule(
                "must be 1-150 letters, digits, '.', '_' or '-', starting with a letter or digit",
                field="id",
            )

    def check_period(self, floor: float, *, now: datetime) -> None:
        """Refuse (:class:`InvalidSchedule`) a schedule whose windows come closer than
        ``floor`` seconds (a runtime's ``schedule_min_period``): ``every``, or the gaps
        between a cron expression's next windows after ``now`` (the runtime's clock).

        Example::

            Schedule("agent", "acme", cron="*/5 * * * *", body="hi").check_period(
                60, now=runtime.clock.now()
            )
        """
        floor = float(floor)
        if self.cron is None:
            assert self.every is not None  # a schedule without cron has every
            if self.every < floor:
                raise InvalidSchedule(
                    f"must be at least {_number(floor)} s (the runtime's schedule_min_period)",
                    field="every",
                )
            return
        finest = 1 if len(self.cron.split()) == 6 else 60  # a seconds field, or minutes
        if floor <= finest:
            return  # no expression of its fields fires closer: none sampled, each pass
        gap = self._shortest_gap(now)
        if gap is not None and gap < floor:
            raise InvalidSchedule(
                f"fires {_number(gap)} s apart; windows must be at least {_number(floor)} s "
                "apart (the runtime's schedule_min_period)",
                field="cron",
            )

    def _shortest_gap(self, now: datetime) -> float | None:
        """Seconds between the closest two of a cron expression's next windows after ``now``."""
        assert self.cron is not None
        times = CronSim(self.cron, now.astimezone(self._zone))
        starts: list[datetime] = []
        try:
            while len(starts) < _GAPS_SAMPLED:
                starts.append(next(times).astimezone(UTC))
        except (StopIteration, ValueError, OverflowError):
            pass  # an expression that stops firing: its gaps so far
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
        return min(gaps, default=None)

    def _check_missed(self) -> None:
        if self.missed not in ("skip", "catch_up"):
            raise InvalidSchedule("must be skip or catch_up", field="missed")
        if self.missed == "skip":
            if self.catch_up is not None:
                raise InvalidSchedule("goes with missed='catch_up'", field="catch_up")
            return
        n = self.catch_up
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CATCH_UP:
            raise InvalidSchedule(
                f"missed='catch_up' needs how many windows to fire, 1-{MAX_CATCH_UP}",
                field="catch_up",
            )

    def _derived_id(self) -> str:
        """A digest of the fields that differ from their defaults (and the required ones):
        the same definition, the same id, also once a later version adds a field."""
        definition = {
            name: value
            for name, value in self.to_json().items()
            if name != "id" and (name in _ALWAYS or value != _DEFAULTS.get(name))
        }
        text = json.dumps(definition, sort_keys=True, separators=(",", ":"))
        return "sch-" + hashlib.sha256(text.encode()).hexdigest()[:20]

    # --- the wire --------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The definition as JSON (camelCase; what a store keeps): absent options omitted."""
        wire: dict[str, Any] = {
            "id": self.id,
            "agent": self.agent,
            "instance": self.instance,
            "session": self.session,
            "body": self.body,
            "timezone": self.timezone,
            "kind": self.kind,
            "missed": self.missed,
            "grace": _number(self.grace),
        }
        if self.cron is not None:
            wire["cron"] = self.cron
        if self.every is not None:
            wire["every"] = _number(self.every)
        if self.kind == "signal":
            wire["signalType"] = self.signal_type
        if self.catch_up is not None:
            wire["catchUp"] = self.catch_up
        return wire

    @classmethod
    def from_json(cls, wire: Mapping[str, Any]) -> Schedule:
        """The schedule :meth:`to_json` wrote (``InvalidSchedule`` for anything else)."""
        names = {_WIRE.get(f.name, f.name): f.name for f in fields(cls) if f.init}
        unknown = sorted(set(wire) - set(names))
        if unknown:
            raise InvalidSchedule("is not a field of a schedule", field=unknown[0])
        try:
            return cls(**{names[key]: value for key, value in wire.items()})
        except TypeError as exc:  # a required field is missing
            raise InvalidSchedule(str(exc)) from None

    # --- the windows -----------------------------------------------------------------

    def latest(self, at: datetime) -> datetime | None:
        """The start of the latest window at ``at`` (``<= at``), UTC; ``None`` if none."""
        if self.cron is None:
            return _EPOCH + self._period() * ((at - _EPOCH) // self._period())
        local = (at + _MICROSECOND).astimezone(self._zone)
        try:
            found = next(CronSim(self.cron, local, reverse=True))
        except (StopIteration, ValueError, OverflowError):
            return None
        return found.astimezone(UTC)

    def next_after(self, at: datetime) -> datetime | None:
        """The start of the first window after ``at``, UTC; ``None`` if none."""
        if self.cron is None:
            return _EPOCH + self._period() * ((at - _EPOCH) // self._period() + 1)
        times = CronSim(self.cron, at.astimezone(self._zone))
        try:
            while (found := next(times).astimezone(UTC)) <= at:
                pass  # a local time that happens twice: cronsim answers its first
        except (StopIteration, ValueError, OverflowError):
            return None
        return found

    def before(self, start: datetime, count: int, after: datetime | None) -> list[datetime]:
        """Up to ``count`` window starts before ``start`` (and after ``after``), oldest
        first."""
        found: list[datetime] = []
        if count <= 0:
            return found
        if self.cron is None:
            period = self._period()
            found = [start - period * n for n in range(count, 0, -1)]
        else:
            times = CronSim(self.cron, start.astimezone(self._zone), reverse=True)
            try:
                while len(found) < count:
                    previous = next(times).astimezone(UTC)
                    if previous < start and (not found or previous < found[-1]):
                        found.append(previous)
            except (StopIteration, ValueError, OverflowError):
                pass
            found.reverse()
        return [at for at in found if after is None or at > after]

    def _period(self) -> timedelta:
        assert self.every is not None  # a schedule without cron has every
        return timedelta(microseconds=round(self.every * 1e6))

    # --- what a window admits --------------------------------------------------------

    def dispatch_id(self, start: datetime) -> str:
        """``schedule:<id>:<start>``: one admission per window, wherever it fires."""
        return f"schedule:{self.id}:{window_name(start)}"

    def inbound(self, start: datetime) -> Inbound:
        """What the window at ``start`` admits."""
        if self.kind == "user":
            return Inbound(kind="user", body=self.body)
        signal = SignalInfo(
            type=self.signal_type, sender={"schedule": self.id}, tag=window_name(start)
        )
        return Inbound(kind="signal", body=self.body, signal=signal)


_WIRE = {"signal_type": "signalType", "catch_up": "catchUp"}
_ALWAYS = frozenset({"agent", "instance", "body", "cron", "every"})
_DEFAULTS: dict[str, Any] = {
    "session": "default",
    "timezone": "UTC",
    "kind": "signal",
    "signalType": "schedule",
    "missed": "skip",
    "grace": 60,
}


def _number(value: float) -> float | int:
    return int(value) if value.is_integer() else value


def _zone(name: object) -> ZoneInfo:
    if not isinstance(name, str) or not name:
        raise InvalidSchedule("must be an IANA time zone name", field="timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"{name!r} is not a known IANA time zone (e.g. 'Europe/Paris')", field="timezone"
        ) from None


def _check_cron(expression: object, zone: ZoneInfo) -> None:
    if not isinstance(expression, str) or not expression.strip():
        raise InvalidSchedule("must be a cron expression", field="cron")
    try:
        times = CronSim(expression, _EPOCH.astimezone(zone))
        next(times)
    except CronSimError as exc:
        raise InvalidSchedule(
            f"{expression!r} is not a cron expression: {exc}", field="cron"
        ) from None
    except (StopIteration, ValueError, OverflowError):
        raise InvalidSchedule(f"{expression!r} never fires", field="cron") from None


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A schedule as :meth:`Runtime.schedules` lists it: where it is defined (the runtime's
    ``config``, or ``durable`` in the store, with the time it was added) and the start of
    its next window (``None`` for a cron expression that no longer fires)."""

    schedule: Schedule
    source: ScheduleSource
    next_fire_at: datetime | None
    created_at: datetime | None = None
    tenant: str | None = None
    """The tenant a durable schedule belongs to, whose sessions its windows dispatch into
    (``None``: none; the configuration's are no tenant's)."""

    @property
    def id(self) -> str:
        return self.schedule.id
