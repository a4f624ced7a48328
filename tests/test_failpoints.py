"""The failpoint grammar (``TETHER_FAILPOINTS``), its triggers and actions, and arming."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tether._failpoints import (
    ARMED,
    POINTS,
    Failpoint,
    Trigger,
    arm,
    arm_from_environment,
    disarm,
    hit,
    hit_sync,
    parse_failpoints,
)
from tether.errors import FailpointSpecInvalid


@pytest.fixture(autouse=True)
def nothing_armed() -> Iterator[None]:
    assert not ARMED
    yield
    disarm()


def boom(name: str) -> BaseException:
    return OSError(f"boom at {name}")


def test_the_issue_example_parses() -> None:
    append, claim = parse_failpoints("store.append=error(0.05);store.claim=crash(once)")
    assert (append.pattern, append.action, append.trigger) == (
        "store.append",
        "error",
        Trigger("probability", probability=0.05),
    )
    assert (claim.pattern, claim.action, claim.trigger) == ("store.claim", "crash", Trigger("nth"))


@pytest.mark.parametrize(
    ("spec", "written"),
    [
        ("store.append=error", "store.append=error"),
        (" store.append = error ( always ) ", "store.append=error"),
        ("model.request=error(1)", "model.request=error"),
        ("model.request=error(1.0)", "model.request=error"),
        ("tool.call=hang(every(3))", "tool.call=hang(every(3))"),
        ("store.*=error(nth(7))", "store.*=error(nth(7))"),
        ("store.claim*=crash(once)", "store.claim*=crash(once)"),
        ("sqlite.commit=delay(0.25)", "sqlite.commit=delay(0.25)"),
        ("sse.send=delay(2, once)", "sse.send=delay(2, once)"),
        ("sse.send=delay(.5, 0.5)", "sse.send=delay(0.5, 0.5)"),
        ("store.read=off", "store.read=off"),
        ("*=error(nth(1))", "*=error(once)"),
    ],
)
def test_entries_parse_and_print_back(spec: str, written: str) -> None:
    (point,) = parse_failpoints(spec)
    assert str(point) == written
    assert [str(p) for p in parse_failpoints(written)] == [written]


def test_empty_entries_are_nothing() -> None:
    assert parse_failpoints("") == ()
    assert parse_failpoints(" ; ;") == ()
    assert len(parse_failpoints("store.read=off;;store.head=error;")) == 2


@pytest.mark.parametrize(
    ("spec", "entry", "reason"),
    [
        ("store.append", "store.append", "an entry is point=action"),
        ("store.apend=error", "store.apend=error", "unknown failpoint 'store.apend'"),
        ("nothing.*=error", "nothing.*=error", "no failpoint begins 'nothing.'"),
        ("Store.Append=error", "Store.Append=error", "not a point name"),
        ("store.append=explode", "store.append=explode", "unknown action 'explode'"),
        ("store.append=error(sometimes)", "store.append=error(sometimes)", "unknown trigger"),
        ("store.append=error(0)", "store.append=error(0)", "a probability is in (0, 1]"),
        ("store.append=error(1.5)", "store.append=error(1.5)", "a probability is in (0, 1]"),
        ("store.append=error(every(0))", "store.append=error(every(0))", "N >= 1"),
        ("store.append=error(nth(x))", "store.append=error(nth(x))", "N >= 1"),
        ("store.append=delay", "store.append=delay", "delay(seconds) needs its seconds"),
        ("store.append=delay(-1)", "store.append=delay(-1)", "needs its seconds"),
        ("store.append=off(once)", "store.append=off(once)", "off takes no argument"),
        ("store.append=error(once", "store.append=error(once", "cannot read the action"),
        ("store.read=off; store.head=", "store.head=", "cannot read the action"),
    ],
)
def test_a_bad_spec_is_a_typed_error_naming_its_entry(spec: str, entry: str, reason: str) -> None:
    with pytest.raises(FailpointSpecInvalid) as raised:
        parse_failpoints(spec)
    error = raised.value
    assert (error.spec, error.entry, error.code) == (spec, entry, "failpoint_spec_invalid")
    assert reason in error.reason and reason in str(error)
    assert isinstance(error, ValueError)


def test_every_point_is_named_by_the_grammar() -> None:
    for name in POINTS:
        (point,) = parse_failpoints(f"{name}=error")
        assert point.matches(name)


def fired(point: Failpoint, hits: int) -> list[int]:
    return [n for n in range(1, hits + 1) if point.fires()]


def test_triggers() -> None:
    (always,) = parse_failpoints("store.head=error")
    (once,) = parse_failpoints("store.head=error(once)")
    (third,) = parse_failpoints("store.head=error(nth(3))")
    (every,) = parse_failpoints("store.head=error(every(3))")
    (off,) = parse_failpoints("store.head=off")
    assert fired(always, 4) == [1, 2, 3, 4]
    assert fired(once, 4) == [1]
    assert fired(third, 7) == [3]
    assert fired(every, 7) == [3, 6]
    assert fired(off, 4) == [] and off.hits == 4
    assert (every.hits, every.fired) == (7, 2)


def test_a_probability_is_drawn_from_the_seed() -> None:
    def draws(seed: int) -> list[int]:
        (point,) = parse_failpoints("store.head=error(0.3)", seed=seed)
        return fired(point, 200)

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)
    assert 20 < len(draws(1)) < 100


async def test_a_hit_does_the_action_of_the_first_entry_that_matches() -> None:
    arm(parse_failpoints("store.head=off; store.*=error(every(2))"))
    await hit("store.head", error=boom)  # off: the entry for store.head is the first
    await hit("store.read", error=boom)
    with pytest.raises(OSError, match=r"boom at store\.append"):
        await hit("store.append", error=boom)  # the prefix's second hit
    await hit("model.request", error=boom)  # matched by nothing


async def test_a_delay_sleeps_on_the_given_sleep_and_a_hang_until_cancelled() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    arm(parse_failpoints("model.request=delay(2.5); tool.call=hang"))
    await hit("model.request", error=boom, sleep=sleep)
    assert slept == [2.5]
    hung = asyncio.ensure_future(hit("tool.call", error=boom))
    await asyncio.sleep(0)  # the hang is a future nothing resolves: it has not returned
    assert not hung.done()
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung


def test_a_thread_hit_raises_the_error() -> None:
    arm(parse_failpoints("sqlite.commit=error(once)"))
    with pytest.raises(OSError, match=r"boom at sqlite\.commit"):
        hit_sync("sqlite.commit", error=boom)
    hit_sync("sqlite.commit", error=boom)


def test_the_environment_arms_once_per_value() -> None:
    assert not arm_from_environment({})
    assert arm_from_environment({"TETHER_FAILPOINTS": ""}) and not ARMED
    environ = {"TETHER_FAILPOINTS": "store.head=error(nth(2))", "TETHER_FAILPOINTS_SEED": "7"}
    assert arm_from_environment(environ)
    (point,) = ARMED
    point.fires()
    assert arm_from_environment(environ) and ARMED == [point] and point.hits == 1
    assert arm_from_environment({"TETHER_FAILPOINTS": "store.read=error"})
    assert [str(p) for p in ARMED] == ["store.read=error"]
    with pytest.raises(FailpointSpecInvalid, match="seed"):
        arm_from_environment({"TETHER_FAILPOINTS": "store.read=off", "TETHER_FAILPOINTS_SEED": "x"})
    with pytest.raises(FailpointSpecInvalid, match="unknown failpoint"):
        arm_from_environment({"TETHER_FAILPOINTS": "store.nothing=error"})
