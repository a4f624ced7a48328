"""A submission held back by a limit over HTTP: queued, its ``waitReason`` ``limit``; its
session, in the sessions list, ``waiting`` for that limit (not ``running``)."""

import asyncio
from collections.abc import Callable
from typing import Any

from tether.engine import Limits, ManualClock

from ..engine.agents import agent
from ..engine.test_limits import Held, _turns
from ..journal.harnesses import EchoHarness

Serve = Callable[..., Any]


async def test_a_queued_submission_held_back_says_limit(asgi: Serve, clock: ManualClock) -> None:
    model = Held(clock)
    server = await asgi({"a": agent(EchoHarness(), model, limits=Limits(concurrency=1))})
    ids = []
    for n in range(2):
        answered = await server.client.post("/agents/a/me", json={"body": "go", "session": f"s{n}"})
        ids.append(answered.json()["submissionId"])
    await asyncio.wait_for(model.entered.wait(), 30)
    await _turns(clock)
    views = [(await server.client.get(f"/submissions/{i}")).json() for i in ids]
    assert sorted((v["status"], v.get("waitReason")) for v in views) == [
        ("queued", "limit"),
        ("running", None),
    ]
    listed = (await server.client.get("/sessions")).json()["sessions"]
    assert sorted((s["status"], s.get("waitReason"), s.get("heldBy")) for s in listed) == [
        ("running", None, None),
        ("waiting", "limit", "agent"),
    ]
    model.release.set()
    async with asyncio.timeout(60):
        for i in ids:
            await server.runtime.wait(i)
