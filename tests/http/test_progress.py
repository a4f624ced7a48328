"""Tool progress reaches stream clients, live and without an ``id:`` (issue 18, item 13)."""

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from tether.demo import demo_agents
from tether.engine import ProgressHub, Runtime
from tether.http import create_app

from .conftest import Followers, Server

Serve = Callable[..., Any]
STREAM = "/agents/assistant/me"
Frame = dict[str, Any]


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.6")


async def _frames_until_settled(c: httpx.AsyncClient, **params: Any) -> list[Frame]:
    """Every SSE event of a followed stream (its fields) until the run settles."""
    frames: list[Frame] = []
    async with c.stream("GET", STREAM, params={"follow": True, **params}) as response:
        assert response.status_code == 200
        fields: Frame = {}
        async for line in response.aiter_lines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
            elif "data" in fields:
                fields["data"] = orjson.loads(fields["data"])
                frames.append(fields)
                if fields["event"] in ("submission_settled", "done"):
                    return frames
                fields = {}
    raise AssertionError("the stream ended before the run settled")


@pytest.mark.parametrize("view", ["records", "stream"])
async def test_progress_reaches_a_live_stream_without_an_id(serve: Serve, view: str) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    followers = Followers(server.runtime.progress)
    await c.post(STREAM, params={"wait": True}, json={"body": "hello"})  # the session exists
    head = (await c.get(f"{STREAM}/records")).json()["next"]
    reader = asyncio.create_task(_frames_until_settled(c, view=view, after=head))
    await followers.until(1)  # progress is never replayed: the stream must be live first
    accepted = (await c.post(STREAM, json={"body": "research tides"})).json()
    async with asyncio.timeout(60):
        frames = await reader
    progress = [f for f in frames if f["event"] == "progress"]
    assert [p["data"]["text"] for p in progress] == [
        f"researching tides: step {step} of 3" for step in (1, 2, 3)
    ]
    for p in progress:
        assert "id" not in p  # Last-Event-ID keeps naming records
        assert set(p["data"]) == {"type", "conversationId", "submissionId", "callId", "text"}
        assert p["data"]["type"] == "tool_progress"
        assert p["data"]["conversationId"] == accepted["conversationId"]
        assert p["data"]["submissionId"] == accepted["submissionId"]
        assert p["data"]["callId"]
    assert all("id" in f for f in frames if f["event"] != "progress")
    # Ephemeral: a replay of the log has none of it.
    replay = (await c.get(STREAM, params={"view": view})).text
    assert "event: progress" not in replay
    # Each stream unsubscribed as it ended.
    await followers.until(0)
    assert not len(server.runtime.progress)


async def test_progress_goes_only_to_its_own_conversation(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    followers = Followers(server.runtime.progress)
    await c.post(STREAM, params={"wait": True}, json={"body": "hello"})
    await c.post("/agents/assistant/other", params={"wait": True}, json={"body": "hello"})
    seen: list[str] = []
    head = (await c.get(f"{STREAM}/records")).json()["next"]

    async def bystander() -> None:
        async with c.stream("GET", "/agents/assistant/other", params={"follow": True}) as r:
            async for line in r.aiter_lines():
                seen.append(line)

    other = asyncio.create_task(bystander())
    reader = asyncio.create_task(_frames_until_settled(c, after=head))
    await followers.until(2)
    await c.post(STREAM, json={"body": "research tides"})
    async with asyncio.timeout(60):
        frames = await reader
    assert any(f["event"] == "progress" for f in frames)
    other.cancel()
    await asyncio.gather(other, return_exceptions=True)
    assert seen and not any("progress" in line for line in seen)


async def test_a_stream_opened_before_its_session_exists_gets_all_its_progress(
    serve: Serve,
) -> None:
    """A browser opens its stream, then sends the first message: the first tool's progress
    comes before the stream has found the new conversation, and must not be lost."""
    server: Server = await serve(demo_agents())
    c = server.client
    followers = Followers(server.runtime.progress)
    reader = asyncio.create_task(_frames_until_settled(c))
    await followers.until(1)
    await c.post(STREAM, json={"body": "research tides"})
    async with asyncio.timeout(60):
        frames = await reader
    assert [f["data"]["text"] for f in frames if f["event"] == "progress"] == [
        f"researching tides: step {step} of 3" for step in (1, 2, 3)
    ]


def test_create_app_leaves_the_runtime_as_it_is() -> None:
    """The apps of one runtime share its own hub (``Runtime.progress``, among its observers
    from the start): making an app per test, per tenant or per reload changes nothing of
    the runtime (docs/architecture.md §7), and each event reaches one hub."""
    runtime = Runtime(demo_agents(), "memory://")
    before = list(runtime.instrumentation.observers)
    for _ in range(3):
        create_app(runtime)
    assert runtime.instrumentation.observers == before
    assert [o for o in before if isinstance(o, ProgressHub)] == [runtime.progress]
