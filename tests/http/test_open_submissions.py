"""``GET /agents/{agent}/{instance}/submissions``: a session's unsettled submissions, each as
``GET /submissions/{id}`` tells it (what the console's runs list shows): scheduled with its
``dueAt``, queued behind it, held back by a limit, each with its priority."""

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tether.engine import Limits, ManualClock

from ..engine.agents import agent, echo_agent
from ..engine.test_limits import Held, _turns
from ..journal.harnesses import EchoHarness

Serve = Callable[..., Any]


async def test_a_sessions_open_submissions_scheduled_and_queued_behind(
    asgi: Serve, clock: ManualClock
) -> None:
    server = await asgi({"echo": echo_agent()})
    c = server.client
    unknown = await c.get("/agents/echo/me/submissions", params={"session": "none"})
    assert unknown.status_code == 404, unknown.text
    later = await c.post(
        "/agents/echo/me", json={"body": "later", "afterSeconds": 60, "priority": 5}
    )
    after = await c.post("/agents/echo/me", json={"body": "then"})
    listed = (await c.get("/agents/echo/me/submissions")).json()
    assert listed["more"] is False
    first, second = listed["submissions"]
    assert first["submissionId"] == later.json()["submissionId"]
    assert first["status"] == "scheduled" and first["priority"] == 5
    assert first["dueAt"] == (clock.now() + timedelta(seconds=60)).isoformat()
    assert second["submissionId"] == after.json()["submissionId"]
    assert second["status"] == "queued" and second["priority"] == 0
    one = (await c.get("/agents/echo/me/submissions", params={"limit": 1})).json()
    assert [s["submissionId"] for s in one["submissions"]] == [first["submissionId"]]
    assert one["more"] is True
    # The console's Abort of a scheduled one: it settles aborted, unrun; the next one runs.
    aborted = await c.post(f"/submissions/{first['submissionId']}/abort", json={})
    assert aborted.status_code == 200, aborted.text
    assert (await server.runtime.wait(first["submissionId"]))["status"] == "aborted"
    await server.runtime.wait(second["submissionId"])
    assert (await c.get("/agents/echo/me/submissions")).json()["submissions"] == []
    refused = await c.get("/agents/echo/me/submissions", params={"limit": 0})
    assert refused.status_code == 422 and refused.json()["error"]["type"] == "invalid_request"


async def test_a_run_held_back_by_a_limit_is_listed_waiting_for_it(
    asgi: Serve, clock: ManualClock
) -> None:
    model = Held(clock)
    server = await asgi({"a": agent(EchoHarness(), model, limits=Limits(concurrency=1))})
    for n in range(2):
        await server.client.post("/agents/a/me", json={"body": "go", "session": f"s{n}"})
    await asyncio.wait_for(model.entered.wait(), 30)
    await _turns(clock)
    found = []
    for n in range(2):
        page = await server.client.get("/agents/a/me/submissions", params={"session": f"s{n}"})
        [item] = page.json()["submissions"]
        found.append((item["status"], item.get("waitReason"), item.get("heldBy")))
    assert sorted(found, key=str) == [("queued", "limit", "agent"), ("running", None, None)]
    model.release.set()
    async with asyncio.timeout(60):
        for n in range(2):
            page = await server.client.get("/agents/a/me/submissions", params={"session": f"s{n}"})
            for item in page.json()["submissions"]:
                await server.runtime.wait(item["submissionId"])


async def test_a_run_held_back_by_its_tenants_limit_says_whose(
    asgi: Serve, clock: ManualClock
) -> None:
    model = Held(clock)
    server = await asgi(
        {"a": agent(EchoHarness(), model)},
        settings={"tenant_limits": {"*": Limits(concurrency=1)}},
    )
    ids = [
        (await server.runtime.dispatch("a", "acme", "go", session=f"s{n}", tenant="acme"))
        for n in range(2)
    ]
    await asyncio.wait_for(model.entered.wait(), 30)
    await _turns(clock)
    views = [(await server.client.get(f"/submissions/{r.submission_id}")).json() for r in ids]
    states = [(v["status"], v.get("waitReason"), v.get("heldBy")) for v in views]
    assert sorted(states, key=str) == [
        ("queued", "limit", "tenant"),
        ("running", None, None),
    ]
    model.release.set()
    async with asyncio.timeout(60):
        for receipt in ids:
            await server.runtime.wait(receipt.submission_id)
