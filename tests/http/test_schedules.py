"""``GET /schedules``, ``POST /schedules`` and ``DELETE /schedules/{id}``: every answer keeps
to the OpenAPI document; bad input is a 422 naming the field, a taken id or a schedule of the
configuration a 409; a schedule added here fires on the server's worker."""

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tether.engine import ManualClock, Schedule

from ..engine.agents import echo_agent
from .conftest import Server
from .test_openapi import Checked, _document

Serve = Callable[..., Any]
T0 = datetime(2026, 1, 5, 8, 58, 30, tzinfo=UTC)
HEARTBEAT = Schedule("echo", "acme", every=3600, body="beat", id="heartbeat")
DIGEST = {"agent": "echo", "instance": "acme", "cron": "30 7 * * *", "body": "digest"}


async def _server(asgi: Serve) -> tuple[Server, Checked]:
    server: Server = await asgi(
        {"echo": echo_agent()}, settings={"clock": ManualClock(T0), "schedules": [HEARTBEAT]}
    )
    return server, Checked(server.client, _document())


async def test_a_schedule_is_added_listed_and_deleted(asgi: Serve) -> None:
    _, call = await _server(asgi)
    definition = {**DIGEST, "timezone": "Europe/Paris", "missed": "catch_up", "catchUp": 2}
    added = await call("POST", "/schedules", json=definition)
    assert added.status_code == 201, added.text
    item = added.json()
    expected = Schedule(
        "echo",
        "acme",
        cron="30 7 * * *",
        timezone="Europe/Paris",
        body="digest",
        missed="catch_up",
        catch_up=2,
    )
    assert item == {
        "id": expected.id,
        "agent": "echo",
        "instance": "acme",
        "session": "default",
        "cron": "30 7 * * *",
        "timezone": "Europe/Paris",
        "kind": "signal",
        "body": "digest",
        "signalType": "schedule",
        "missed": "catch_up",
        "catchUp": 2,
        "grace": 60.0,
        "source": "durable",
        "nextFireAt": "2026-01-06T06:30:00+00:00",
        "createdAt": "2026-01-05T08:58:30+00:00",
    }
    again = await call("POST", "/schedules", json=definition)
    assert again.status_code == 201 and again.json() == item  # the same definition: kept once
    listed = (await call("GET", "/schedules")).json()["schedules"]
    assert [(s["id"], s["source"]) for s in listed] == [
        ("heartbeat", "config"),
        (expected.id, "durable"),
    ]
    assert listed[0]["every"] == 3600 and listed[0]["nextFireAt"] == "2026-01-05T09:00:00+00:00"
    assert "cron" not in listed[0] and "createdAt" not in listed[0]
    deleted = await call("DELETE", f"/schedules/{expected.id}")
    assert deleted.status_code == 200 and deleted.json() == {"deleted": expected.id}
    gone = await call("DELETE", f"/schedules/{expected.id}")
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "schedule_not_found"
    assert [s["id"] for s in (await call("GET", "/schedules")).json()["schedules"]] == ["heartbeat"]


async def test_conflicts_are_409(asgi: Serve) -> None:
    _, call = await _server(asgi)
    assert (await call("POST", "/schedules", json={**DIGEST, "id": "daily"})).status_code == 201
    taken = await call("POST", "/schedules", json={**DIGEST, "id": "daily", "body": "other"})
    assert taken.status_code == 409
    assert taken.json()["error"]["type"] == "schedule_conflict"
    assert taken.json()["error"]["details"] == {"field": "id"}
    configured = await call("POST", "/schedules", json={**DIGEST, "id": "heartbeat"})
    assert configured.status_code == 409
    refused = await call("DELETE", "/schedules/heartbeat")
    assert refused.status_code == 409 and "configuration" in refused.json()["error"]["message"]
    unknown = await call("POST", "/schedules", json={**DIGEST, "agent": "nobody"})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "unknown_agent"


BAD: list[tuple[dict[str, Any], str]] = [
    ({"cron": "61 * * * *"}, "cron"),
    ({"cron": "0 0 30 2 *"}, "cron"),
    ({"timezone": "Mars/Olympus"}, "timezone"),
    ({"every": 60}, "cron"),  # both
    ({"cron": None}, "cron"),  # neither
    ({"cron": None, "every": 0}, "every"),
    ({"cron": None, "every": -5}, "every"),
    ({"catchUp": 3}, "catchUp"),  # without missed=catch_up
    ({"missed": "catch_up"}, "catchUp"),  # without how many
    ({"missed": "later"}, "missed"),
    ({"kind": "user", "signalType": "tick"}, "signalType"),
    ({"id": "a/b"}, "id"),
    ({"instance": ""}, "instance"),
    ({"body": ""}, "body"),
    ({"grace": 0}, "grace"),
    ({"when": "soon"}, "when"),
]


async def refused_naming(call: Checked, change: dict[str, Any], field: str) -> None:
    """A POST of the digest changed by ``change`` is a 422 whose details name ``field``."""
    answer = await call("POST", "/schedules", json={**DIGEST, **change})
    assert answer.status_code == 422, (change, answer.text)
    error = answer.json()["error"]
    details = error["details"] if isinstance(error["details"], list) else [error["details"]]
    assert field in [problem["field"] for problem in details], (change, error)


async def test_bad_input_is_422_naming_the_field(asgi: Serve) -> None:
    _, call = await _server(asgi)
    for change, field in BAD:
        await refused_naming(call, change, field)
    assert (await call("GET", "/schedules")).json()["schedules"][1:] == []


OUT_OF_RANGE: list[tuple[dict[str, Any], str]] = [
    ({"cron": None, "every": 0.001}, "every"),  # under the floor: a storm of windows
    ({"cron": None, "every": 0.5}, "every"),
    ({"cron": None, "every": 1e308}, "every"),  # was a 500
    ({"cron": None, "every": 367 * 86400}, "every"),
    ({"missed": "catch_up", "catchUp": 1000}, "catchUp"),
    ({"missed": "catch_up", "catchUp": 101}, "catchUp"),
    ({"grace": 1e308}, "grace"),  # was kept, then stopped the scheduler
    ({"cron": "* * * * * *"}, "cron"),  # every second: under a floor of 2 s
]


async def test_out_of_range_values_are_422_naming_the_field(asgi: Serve) -> None:
    """Issue 36: ``every: 0.001`` with ``catchUp: 1000`` admitted 351 submissions in 5 s from
    one POST, and ``every: 1e308`` answered 500. (This server's floor is 2 s.)"""
    server: Server = await asgi(
        {"echo": echo_agent()},
        settings={"clock": ManualClock(T0), "schedule_min_period": 2.0},
    )
    call = Checked(server.client, _document())
    for change, field in OUT_OF_RANGE:
        await refused_naming(call, change, field)
    assert (await call("GET", "/schedules")).json()["schedules"] == []
    at_the_floor = {**DIGEST, "cron": None, "every": 2}
    assert (await call("POST", "/schedules", json=at_the_floor)).status_code == 201


async def test_a_schedule_added_over_http_fires_on_the_servers_worker(asgi: Serve) -> None:
    server, call = await _server(asgi)
    runtime = server.runtime
    definition = {"agent": "echo", "instance": "acme", "every": 60, "grace": 10, "body": "hi"}
    item = (await call("POST", "/schedules", json=definition)).json()
    clock = runtime.clock
    assert isinstance(clock, ManualClock)
    await clock.advance(30)  # 08:59
    assert runtime._scheduler is not None
    await runtime._scheduler.tick()
    [submission] = [
        s for s in await server.store.list_submissions() if s.dispatch_id.startswith("schedule:")
    ]
    assert submission.dispatch_id == f"schedule:{item['id']}:2026-01-05T08:59:00Z"
    settled = await call("GET", f"/submissions/{submission.id}", params={"wait": True})
    assert settled.json()["status"] == "settled"
