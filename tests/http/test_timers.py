"""A delayed dispatch over HTTP: ``runAt`` / ``afterSeconds`` in the body admit it
``scheduled`` (its ``dueAt`` on the submission), abortable; both, a past or absurd time, or
a time with no offset are a 422 envelope, nothing written."""

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tether.engine import ManualClock

from ..engine.agents import echo_agent
from ..engine.waits import advance_until

Serve = Callable[..., Any]


async def test_after_seconds_schedules_the_run_and_it_runs_at_its_time(
    asgi: Serve, clock: ManualClock
) -> None:
    server = await asgi({"echo": echo_agent()})
    accepted = await server.client.post(
        "/agents/echo/me", json={"body": "later", "afterSeconds": 30}
    )
    assert accepted.status_code == 202
    location = accepted.headers["location"]
    scheduled = (await server.client.get(location)).json()
    assert scheduled["status"] == "scheduled"
    assert scheduled["dueAt"] == (clock.now() + timedelta(seconds=30)).isoformat()
    assert "runAt" not in scheduled["input"] and "afterSeconds" not in scheduled["input"]
    await clock.advance(30)
    settled = await advance_until(clock, server.runtime.wait(accepted.json()["submissionId"]), 0.25)
    assert settled["result"] == "echo: later"


async def test_run_at_schedules_and_an_abort_settles_it_unrun(
    asgi: Serve, clock: ManualClock
) -> None:
    server = await asgi({"echo": echo_agent()})
    at = (clock.now() + timedelta(days=1)).isoformat()
    accepted = await server.client.post("/agents/echo/me", json={"body": "x", "runAt": at})
    assert accepted.status_code == 202
    submission_id = accepted.json()["submissionId"]
    aborted = await server.client.post(f"/submissions/{submission_id}/abort", json={})
    assert aborted.status_code == 200
    settled = await server.runtime.wait(submission_id)
    assert settled["status"] == "aborted"


@pytest.mark.parametrize(
    "timing",
    [
        {"runAt": "FUTURE", "afterSeconds": 5},
        {"runAt": "2020-01-01T00:00:00+00:00"},
        {"runAt": "2030-01-01T00:00:00"},
        {"runAt": "9999-01-01T00:00:00Z"},
        {"afterSeconds": -1},
        {"afterSeconds": 10**12},
        {"afterSeconds": "soon"},
    ],
)
async def test_a_bad_delay_is_a_422_envelope(
    asgi: Serve, clock: ManualClock, timing: dict[str, Any]
) -> None:
    server = await asgi({"echo": echo_agent()})
    if timing.get("runAt") == "FUTURE":
        timing = {**timing, "runAt": (clock.now() + timedelta(hours=1)).isoformat()}
    refused = await server.client.post("/agents/echo/me", json={"body": "x", **timing})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["message"]
    assert await server.store.list_submissions() == []
