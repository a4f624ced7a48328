"""agentex's own SSE client (``agentex-client``) reads Tether's canonical stream.

``tasks.stream_events`` asks for ``/tasks/{task_id}/stream``, a URL shape Tether does not
serve, so the stream is read with the same client's public verb method on Tether's route:
``client.get(..., stream=True, stream_cls=AsyncStream[object])``, the call
``stream_events`` itself makes, through agentex's ``AsyncStream`` and its ``SSEDecoder``.
That decoder dispatches an event at every blank line once anything (a ``retry:``, or the
``id:`` it never forgets) has been seen, and parses its data as JSON: a frame of its own
for ``retry:``, or a heartbeat ending in a blank line after the first event, is a
``JSONDecodeError`` there.
"""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from tether.demo import demo_agents
from tether.stream import project

from .conftest import Server

pytest.importorskip("agentex")

from agentex import AsyncAgentex, AsyncStream
from agentex.types import TaskMessageUpdate

STREAM = "/agents/assistant/me"
UPDATE: TypeAdapter[TaskMessageUpdate] = TypeAdapter(TaskMessageUpdate)


class _Tee(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, tee: "TeeTransport") -> None:
        self.inner, self.tee = inner, tee

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.tee.seen.append(chunk)
            self.tee.arrived.set()
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class TeeTransport(httpx.AsyncHTTPTransport):
    """Real HTTP, with every body chunk the client reads also kept in ``seen``."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bytes] = []
        self.arrived = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Tee(response.stream, self)
        return response


async def agentex_stream(client: AsyncAgentex, **params: Any) -> AsyncStream[object]:
    return await client.get(
        STREAM,
        cast_to=object,
        options={"params": {"view": "stream", **params}},
        stream=True,
        stream_cls=AsyncStream[object],
    )


async def expected(server: Server) -> list[dict[str, Any]]:
    conversation_id = (await server.client.get(f"{STREAM}/records")).json()["conversationId"]
    records = await server.store.read(conversation_id)
    return [e.model_dump(mode="json", exclude_none=True) for e in project(records)]


def check(events: list[object]) -> list[TaskMessageUpdate]:
    updates = [UPDATE.validate_python(event) for event in events]
    assert [u.model_dump(mode="json", exclude_none=True) for u in updates] == events
    return updates


def kinds(updates: list[TaskMessageUpdate]) -> set[str]:
    """``<type>:<content or delta type>`` of each update, e.g. ``delta:text``."""
    seen = set()
    for update in updates:
        part = getattr(update, "content", None) or getattr(update, "delta", None)
        seen.add(f"{update.type}:{getattr(part, 'type', '')}")
    return seen


async def test_agentex_reads_every_event_of_a_finished_session(serve: Any) -> None:
    server: Server = await serve(demo_agents())
    for text in ("what time is it?", "hello"):  # a clock call and its result, then text
        await server.client.post(STREAM, params={"wait": True}, json={"body": text})
    want = await expected(server)
    async with AsyncAgentex(base_url=server.url, api_key=None, max_retries=0) as client:
        stream = await agentex_stream(client)
        got = [event async for event in stream]
    assert got == want  # in order, nothing dropped, no empty event
    updates = check(got)
    assert {"start:text", "delta:text", "done:", "full:tool_request", "full:tool_response"} <= (
        kinds(updates)
    )


async def test_agentex_follows_a_live_session_across_heartbeats(serve: Any) -> None:
    """Heartbeats come between the events of two submissions: none becomes an event."""
    server: Server = await serve(demo_agents(), heartbeat=0.05)
    await server.client.post(STREAM, params={"wait": True}, json={"body": "what time is it?"})
    first = await expected(server)
    tee = TeeTransport()
    http = httpx.AsyncClient(transport=tee, timeout=90)
    async with AsyncAgentex(base_url=server.url, http_client=http, max_retries=0) as client:
        stream = await agentex_stream(client, follow=True)
        got: list[object] = []
        more = asyncio.Event()

        async def read() -> None:
            try:
                async for event in stream:  # until it is cancelled below
                    got.append(event)
                    more.set()
            finally:
                more.set()

        async def until(count: int) -> None:
            while len(got) < count:
                if reader.done():
                    reader.result()  # agentex's error, if it failed
                    raise AssertionError(f"the stream ended after {len(got)} events")
                more.clear()
                await more.wait()

        reader = asyncio.create_task(read())
        async with asyncio.timeout(60):
            await until(len(first))
            assert got == first
            # The reader waits in agentex's decoder, which reads the heartbeats meanwhile.
            while b"heartbeat" not in b"".join(tee.seen).rpartition(b"data: ")[2]:
                tee.arrived.clear()
                await tee.arrived.wait()
            await server.client.post(STREAM, params={"wait": True}, json={"body": "hello"})
            want = await expected(server)
            await until(len(want))
        reader.cancel()
        await asyncio.wait({reader})
        await stream.close()
    assert got == want
    check(got)
    raw = b"".join(tee.seen)
    assert raw.startswith(b"retry: 2000\nid: ")  # the first event carries the retry field
    assert b"\n: heartbeat\n" in raw
