"""A :class:`Schedule` on its own: what it refuses, its id, its JSON, and its windows (cron in
a time zone across daylight saving time, periods from the epoch)."""

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tether.engine import InvalidSchedule, Schedule
from tether.engine._schedules import window_name

PARIS = ZoneInfo("Europe/Paris")
NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
"""The clock's time the gaps of a cron expression are sampled from."""


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        ({"cron": "61 * * * *"}, "cron", "not a cron expression: Bad minute"),
        ({"cron": "* * *"}, "cron", "Wrong number of fields"),
        ({"cron": "0 0 30 2 *"}, "cron", "Bad day-of-month"),
        ({"cron": ""}, "cron", "must be a cron expression"),
        ({}, "cron", "exactly one of cron and every"),
        ({"cron": "* * * * *", "every": 60}, "cron", "exactly one of cron and every"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "timezone", "not a known IANA"),
        ({"cron": "* * * * *", "timezone": "../etc/passwd"}, "timezone", "not a known IANA"),
        ({"every": 0}, "every", "positive"),
        ({"every": -1}, "every", "positive"),
        ({"every": float("nan")}, "every", "positive"),
        ({"every": True}, "every", "number of seconds"),
        ({"every": 1e-9}, "every", "at least a microsecond"),
        ({"every": 60, "timezone": "Europe/Paris"}, "timezone", "goes with cron only"),
        ({"every": 60, "kind": "steer"}, "kind", "signal or user"),
        ({"every": 60, "kind": "user", "signal_type": "x"}, "signal_type", "kind='signal'"),
        ({"every": 60, "signal_type": ""}, "signal_type", "1-200"),
        ({"every": 60, "missed": "later"}, "missed", "skip or catch_up"),
        ({"every": 60, "catch_up": 2}, "catch_up", "goes with missed='catch_up'"),
        ({"every": 60, "missed": "catch_up"}, "catch_up", "how many"),
        ({"every": 60, "missed": "catch_up", "catch_up": 0}, "catch_up", "how many"),
        ({"every": 60, "missed": "catch_up", "catch_up": 101}, "catch_up", "1-100"),
        ({"every": 1e308}, "every", "at most 366 days"),  # was an OverflowError
        ({"every": 366 * 86400 + 1}, "every", "at most 366 days"),
        ({"every": float("inf")}, "every", "positive"),
        ({"every": 60, "grace": 1e308}, "grace", "at most 366 days"),
        ({"every": 60, "grace": 0}, "grace", "positive"),
        ({"every": 60, "id": "a/b"}, "id", "letters, digits"),
        ({"every": 60, "id": "x" * 151}, "id", "letters, digits"),
        ({"every": 60, "body": ""}, "body", "required"),
        ({"every": 60, "session": "a/b"}, "session", "without '/'"),
    ],
)
def test_a_bad_field_is_a_value_error_naming_it(
    options: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InvalidSchedule, match=message) as raised:
        Schedule("agent", "instance", **{"body": "hi", **options})
    assert raised.value.field == field
    assert isinstance(raised.value, ValueError)


def test_the_id_is_derived_from_the_definition_or_given() -> None:
    one = Schedule("a", "b", every=300, body="x")
    assert one.id.startswith("sch-") and len(one.id) == 24
    assert Schedule("a", "b", every=300.0, body="x").id == one.id  # the same definition
    assert Schedule("a", "b", every=300, body="x", session="default").id == one.id
    assert Schedule("a", "b", every=300, body="y").id != one.id
    assert Schedule("a", "b", every=300, body="x", grace=5).id != one.id
    assert Schedule("a", "b", every=300, body="x", id="mine").id == "mine"


def test_the_json_form_round_trips() -> None:
    schedule = Schedule(
        "a",
        "b",
        cron="30 7 * * *",
        timezone="Europe/Paris",
        body="x",
        missed="catch_up",
        catch_up=3,
        signal_type="digest",
    )
    wire = schedule.to_json()
    assert wire == {
        "id": schedule.id,
        "agent": "a",
        "instance": "b",
        "session": "default",
        "body": "x",
        "cron": "30 7 * * *",
        "timezone": "Europe/Paris",
        "kind": "signal",
        "signalType": "digest",
        "missed": "catch_up",
        "catchUp": 3,
        "grace": 60,
    }
    assert Schedule.from_json(wire) == schedule
    user = Schedule("a", "b", every=0.5, body="x", kind="user")
    assert Schedule.from_json(user.to_json()) == user
    with pytest.raises(InvalidSchedule) as raised:
        Schedule.from_json({**wire, "colour": "red"})
    assert raised.value.field == "colour"
    with pytest.raises(InvalidSchedule, match="body"):
        Schedule.from_json({k: v for k, v in wire.items() if k != "body"})


def test_periods_count_from_the_epoch() -> None:
    schedule = Schedule("a", "b", every=300, body="x")
    now = utc(2026, 1, 5, 10, 7, 30)
    assert schedule.latest(now) == utc(2026, 1, 5, 10, 5)
    assert schedule.latest(utc(2026, 1, 5, 10, 5)) == utc(2026, 1, 5, 10, 5)  # at its start
    assert schedule.next_after(now) == utc(2026, 1, 5, 10, 10)
    assert schedule.next_after(utc(2026, 1, 5, 10, 10)) == utc(2026, 1, 5, 10, 15)
    assert schedule.before(utc(2026, 1, 5, 10, 5), 2, None) == [
        utc(2026, 1, 5, 9, 55),
        utc(2026, 1, 5, 10, 0),
    ]
    assert schedule.before(utc(2026, 1, 5, 10, 5), 3, utc(2026, 1, 5, 9, 55)) == [
        utc(2026, 1, 5, 10, 0)
    ]
    half = Schedule("a", "b", every=1.5, body="x")
    assert half.latest(utc(2026, 1, 1, 0, 0, 1)) == utc(2026, 1, 1)
    assert half.next_after(utc(2026, 1, 1)) == utc(2026, 1, 1) + timedelta(seconds=1.5)
    assert window_name(utc(2026, 1, 1) + timedelta(seconds=1.5)) == "2026-01-01T00:00:01.500000Z"


def test_a_cron_window_is_named_by_its_start_in_utc() -> None:
    schedule = Schedule("a", "b", cron="0 9 * * MON-FRI", timezone="Europe/Paris", body="x")
    friday_evening = utc(2026, 1, 9, 18)
    assert schedule.latest(friday_evening) == utc(2026, 1, 9, 8)
    assert schedule.next_after(friday_evening) == utc(2026, 1, 12, 8)  # Monday, 09:00 in Paris
    assert schedule.before(utc(2026, 1, 12, 8), 2, None) == [utc(2026, 1, 8, 8), utc(2026, 1, 9, 8)]
    assert (
        schedule.dispatch_id(utc(2026, 1, 12, 8)) == f"schedule:{schedule.id}:2026-01-12T08:00:00Z"
    )


def test_a_fixed_time_in_the_spring_gap_fires_after_it() -> None:
    """02:30 does not exist in Paris on 29 March 2026 (02:00 jumps to 03:00): that day's
    window is 03:00 local, 01:00 UTC; the days around it keep 02:30."""
    schedule = Schedule("a", "b", cron="30 2 * * *", timezone="Europe/Paris", body="x")
    assert schedule.next_after(utc(2026, 3, 28, 12)) == utc(2026, 3, 29, 1)
    assert schedule.latest(utc(2026, 3, 29, 12)) == utc(2026, 3, 29, 1)
    assert schedule.next_after(utc(2026, 3, 29, 12)) == utc(2026, 3, 30, 0, 30)
    assert schedule.before(utc(2026, 3, 30, 0, 30), 2, None) == [
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 1),
    ]


def test_a_fixed_time_in_the_repeated_hour_fires_once() -> None:
    """02:30 happens twice in Paris on 25 October 2026: the window is the first."""
    schedule = Schedule("a", "b", cron="30 2 * * *", timezone="Europe/Paris", body="x")
    assert schedule.next_after(utc(2026, 10, 24, 12)) == utc(2026, 10, 25, 0, 30)
    assert schedule.next_after(utc(2026, 10, 25, 0, 30)) == utc(2026, 10, 26, 1, 30)


def test_a_wildcard_hour_follows_real_time_across_the_change() -> None:
    schedule = Schedule("a", "b", cron="0 * * * *", timezone="Europe/Paris", body="x")
    starts, at = [], utc(2026, 10, 24, 23, 30)  # 01:30 in Paris, summer time
    for _ in range(3):
        found = schedule.next_after(at)
        assert found is not None
        starts.append(found.astimezone(PARIS).strftime("%H:%M%z"))
        at = found
    assert starts == ["02:00+0200", "02:00+0100", "03:00+0100"]  # the repeated hour: twice
    spring, at = [], utc(2026, 3, 28, 23, 30)
    for _ in range(2):
        found = schedule.next_after(at)
        assert found is not None
        spring.append(found.astimezone(PARIS).strftime("%H:%M%z"))
        at = found
    assert spring == ["01:00+0100", "03:00+0200"]  # no 02:00 that night


def test_the_floor_holds_for_cron_gaps_too() -> None:
    """A six-field expression fires each second at the finest, a five-field one each minute:
    under a floor above that, the gaps of its next windows are what is checked."""
    every_second = Schedule("agent", "instance", cron="* * * * * *", body="hi")
    every_second.check_period(1, now=NOW)
    with pytest.raises(InvalidSchedule, match="fires 1 s apart") as raised:
        every_second.check_period(2, now=NOW)
    assert raised.value.field == "cron"
    twice_an_hour = Schedule("agent", "instance", cron="0,1 * * * *", body="hi")
    twice_an_hour.check_period(60, now=NOW)
    with pytest.raises(InvalidSchedule, match="fires 60 s apart"):
        twice_an_hour.check_period(120, now=NOW)
    Schedule("agent", "instance", cron="0 * * * *", body="hi").check_period(3600, now=NOW)
    with pytest.raises(InvalidSchedule, match="at least 2 s"):
        Schedule("agent", "instance", every=1, body="hi").check_period(2, now=NOW)
