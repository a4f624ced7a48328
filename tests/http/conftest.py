"""A real uvicorn on 127.0.0.1 with an ephemeral port, per test."""

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from tether.engine import Runtime
from tether.http import create_app
from tether.store import Store

from ..engine.conftest import FAST


@dataclass
class Server:
    url: str
    runtime: Runtime
    client: httpx.AsyncClient
    store: Store


@pytest.fixture
async def serve(store: Store) -> AsyncIterator[Callable[..., Any]]:
    started: list[tuple[uvicorn.Server, asyncio.Task[None], Runtime, httpx.AsyncClient]] = []

    async def start(
        agents: dict[str, Any], *, customize: Callable[[Any], None] | None = None, **options: Any
    ) -> Server:
        """``customize(app)`` may add to the app before it serves (a test's own middleware)."""
        runtime = Runtime(agents, store, **FAST)
        app = create_app(runtime, manage_runtime=True, **options)
        if customize is not None:
            customize(app)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        async with asyncio.timeout(60):  # a loaded machine starts it in seconds, not ms
            while not server.started:  # uvicorn exposes a flag, not an event
                if task.done():
                    await task  # it failed to start: its error, not a timeout
                    raise AssertionError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        url = f"http://127.0.0.1:{port}"
        # ?wait holds a request for up to 60 s on the server: the client waits longer
        client = httpx.AsyncClient(base_url=url, timeout=90)
        started.append((server, task, runtime, client))
        return Server(url, runtime, client, store)

    yield start
    for server, task, _, client in started:
        await client.aclose()
        server.should_exit = True
        await task
