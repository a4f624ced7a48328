"""The record stream: resume at every cut, live tailing, heartbeats, idle end."""

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from tether.demo import demo_agents
from tether.stream import project

from .conftest import Followers, Server

Serve = Callable[..., Any]
STREAM = "/agents/assistant/me"


@dataclass(frozen=True)
class Event:
    id: int
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Progress:
    """A live event without an ``id:`` (tool progress)."""

    kind: str
    data: dict[str, Any]


async def events(
    client: httpx.AsyncClient, *, last_event_id: int | None = None, **params: Any
) -> AsyncIterator[Event | Progress | str]:
    """Parsed SSE events; comment lines come through as ``str``."""
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    async with client.stream("GET", STREAM, params=params, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                yield line
            elif line:
                name, _, value = line.partition(": ")
                fields[name] = value
            elif "data" in fields and "id" not in fields:
                yield Progress(fields["event"], orjson.loads(fields["data"]))
                fields = {}
            elif "data" in fields:
                yield Event(int(fields["id"]), fields["event"], orjson.loads(fields["data"]))
                fields = {}
            else:
                fields = {}


async def collect(client: httpx.AsyncClient, **options: Any) -> list[Event]:
    return [e async for e in events(client, **options) if isinstance(e, Event)]


async def fill(server: Server, records: int) -> list[Event]:
    """Run chat turns until the session holds at least ``records`` records."""
    c = server.client
    while True:
        await c.post(STREAM, params={"wait": True}, json={"body": "hello"})
        stored = await collect(c)
        if len(stored) >= records:
            return stored


@pytest.fixture(autouse=True)
def quick_research(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.3")


async def test_stream_matches_the_log_byte_for_byte(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    stored = await fill(server, 10)
    conversation_id = stored[0].data["conversationId"]
    log = await server.store.read(conversation_id)
    assert [e.id for e in stored] == [r.seq for r in log]
    assert [e.kind for e in stored] == [r.kind for r in log]
    assert [e.data for e in stored] == [orjson.loads(r.to_json()) for r in log]


async def test_resume_at_every_cut_has_no_gaps_or_duplicates(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    full = await fill(server, 50)
    expected = [e.id for e in full]
    for cut in range(len(full) + 1):
        seen: list[int] = []
        if cut:
            async for event in events(server.client):
                if isinstance(event, Event):
                    seen.append(event.id)
                    if len(seen) == cut:
                        break  # the client drops the connection here
        resumed = await collect(server.client, last_event_id=seen[-1] if seen else None)
        assert seen + [e.id for e in resumed] == expected, cut


async def test_after_and_last_event_id_take_the_later_offset(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    full = await fill(server, 6)
    assert [e.id for e in await collect(server.client, after=3)] == [e.id for e in full[3:]]
    both = await collect(server.client, after=2, last_event_id=4)
    assert [e.id for e in both] == [e.id for e in full[4:]]
    bad = await server.client.get(STREAM, headers={"Last-Event-ID": "nope"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_last_event_id"


async def test_many_live_readers_see_the_same_records_as_they_land(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    followers = Followers(server.runtime.progress)

    async def read_until_settled() -> list[int]:
        ids: list[int] = []
        async for event in events(c, follow=True):
            if isinstance(event, Event):
                ids.append(event.id)
                if event.kind == "submission_settled":
                    return ids
        raise AssertionError("stream ended before the run settled")

    readers = [asyncio.create_task(read_until_settled()) for _ in range(8)]
    await followers.until(8)  # all live before the run starts
    await c.post(STREAM, json={"body": "research the tides"})
    first, *others = await asyncio.gather(*readers)
    assert first == list(range(1, len(first) + 1))
    assert all(other == first for other in others)


async def test_a_reader_reconnecting_mid_run_misses_nothing(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    await c.post(STREAM, json={"body": "research the moon"})
    seen: list[Event] = []
    async for event in events(c, follow=True):
        if isinstance(event, Event):
            seen.append(event)
            if len(seen) == 3:
                break
    async for event in events(c, follow=True, last_event_id=seen[-1].id):
        if isinstance(event, Event):
            seen.append(event)
            if event.kind == "submission_settled":
                break
    conversation_id = seen[0].data["conversationId"]
    stored = await server.store.read(conversation_id)
    assert [e.id for e in seen] == [r.seq for r in stored][: len(seen)]
    assert seen[-1].kind == "submission_settled"


async def test_idle_streams_end_unless_followed_and_followers_get_heartbeats(
    serve: Serve,
) -> None:
    server: Server = await serve(demo_agents(), heartbeat=0.05)
    await server.client.post(STREAM, params={"wait": True}, json={"body": "hi"})
    assert await collect(server.client)  # returns: the session is idle
    comments: list[str] = []
    async with asyncio.timeout(60):
        async for event in events(server.client, follow=True):
            if isinstance(event, str):
                comments.append(event)
                if len(comments) == 2:
                    break
    assert comments == [": heartbeat", ": heartbeat"]


async def test_streaming_an_unknown_agent_is_a_typed_404(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    response = await server.client.get("/agents/nobody/me")
    assert response.status_code == 404 and response.json()["error"]["type"] == "unknown_agent"


async def raw_frames(
    client: httpx.AsyncClient, *, last_event_id: str | None = None, **params: Any
) -> list[tuple[str, dict[str, Any]]]:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    frames: list[tuple[str, dict[str, Any]]] = []
    async with client.stream("GET", STREAM, params=params, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        fields: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
            elif "data" in fields:
                if "id" in fields:  # progress (no id) is live only, not part of the log
                    frames.append((fields["id"], orjson.loads(fields["data"])))
                fields = {}
    return frames


async def test_the_canonical_view_resumes_at_every_event_cut(serve: Serve) -> None:
    server: Server = await serve(demo_agents())
    c = server.client
    for text in ("hello", "research tides", "email bob@example.com: hi"):
        await c.post(STREAM, params={"wait": True, "timeout": 1}, json={"body": text})
    full = await raw_frames(c, view="stream")
    conversation_id = (await c.get(f"{STREAM}/records")).json()["conversationId"]
    expected = [
        e.model_dump(mode="json", exclude_none=True)
        for e in project(await server.store.read(conversation_id))
    ]
    assert [data for _, data in full] == expected
    assert {data["type"] for _, data in full} == {"start", "delta", "done", "full"}
    for cut in range(1, len(full)):
        resumed = await raw_frames(c, view="stream", last_event_id=full[cut - 1][0])
        assert full[:cut] + resumed == full, cut
    bad = await c.get(STREAM, params={"view": "stream"}, headers={"Last-Event-ID": "4"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_last_event_id"
