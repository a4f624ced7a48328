"""Failpoint ``sse.send``: a session's event stream drops where a test says, as a peer's
reset would drop it; the next stream is whole again (docs/testing.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tether._failpoints import ARMED, disarm
from tether.demo import demo_agents
from tether.testing import failpoints

from .conftest import Server

STREAM = "/agents/assistant/me"


@pytest.fixture(autouse=True)
def nothing_armed() -> Iterator[None]:
    assert not ARMED
    yield
    disarm()


async def read(server: Server, **headers: str) -> bytes:
    body = b""
    async with server.client.stream("GET", STREAM, headers=headers) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_bytes():
            body += chunk
    return body


async def test_the_stream_drops_at_the_failpoint_and_resumes(
    asgi: Callable[..., Any],
) -> None:
    server: Server = await asgi(demo_agents())
    answered = await server.client.post(STREAM, params={"wait": True}, json={"body": "hi"})
    assert answered.status_code == 200
    whole = await read(server)
    assert whole.count(b"event: submission_settled") == 1
    with failpoints("sse.send=error(nth(2))") as armed:
        with pytest.raises(ConnectionResetError, match=r"failpoint sse\.send"):
            await read(server)  # the retry line went out; the records' chunk did not
        assert (armed.hits("sse.send"), armed.fired("sse.send")) == (2, 1)
        again = await read(server)  # the fault was once: the next stream is whole
    assert again == whole
