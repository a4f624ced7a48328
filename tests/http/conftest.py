"""Two ways to serve the app per test: in this process (``asgi``, for request/response
routes) and a real uvicorn on 127.0.0.1 with an ephemeral port (``serve``, for streams,
sockets and what the server itself does)."""

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
from fastapi import APIRouter

from tether.engine import ManualClock, ProgressHub, ProgressSubscription, Runtime
from tether.http import create_app
from tether.store import SessionKey, Store

from ..engine.conftest import FAST
from ..engine.waits import until_appended as appended

__all__ = ("IN_PROCESS_URL", "Followers", "Server", "asgi", "serve", "until_appended")

T = TypeVar("T")
IN_PROCESS_URL = "http://tether.test"


@dataclass
class Server:
    url: str
    runtime: Runtime
    client: httpx.AsyncClient
    store: Store


@pytest.fixture
async def asgi(store: Store, clock: ManualClock) -> AsyncIterator[Callable[..., Awaitable[Server]]]:
    """The app in this process, called through ``httpx.ASGITransport``: no socket, no server
    to start and wait for. For the routes that answer a request and are done.

    ASGITransport runs no lifespan, so this runs the app's own (``manage_runtime``: the
    runtime starts and closes as it does under a server). It hands a response over only
    once the app has written all of it, so a stream read here must end (not followed), and
    an exception the app lets out is raised here (``raise_app_exceptions``), where a server
    would log it. What needs the real thing stays on ``serve``: SSE read as it comes, a body
    trickled or cut short on a socket, HEAD (the server drops the body), what uvicorn logs,
    and processes that crash.
    """
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            agents: dict[str, Any],
            *,
            settings: dict[str, Any] | None = None,
            webhooks: Callable[[Runtime], Sequence[APIRouter]] | None = None,
            **options: Any,
        ) -> Server:
            """``settings`` go to the runtime (``subagents=...``; the test's ``clock`` unless
            they name another), ``options`` to the app, with the ``webhooks`` made for the
            runtime."""
            runtime = Runtime(agents, store, **{**FAST, "clock": clock, **(settings or {})})
            hooks = webhooks(runtime) if webhooks is not None else ()
            app = create_app(runtime, manage_runtime=True, webhooks=hooks, **options)
            await stack.enter_async_context(app.router.lifespan_context(app))
            client = httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url=IN_PROCESS_URL, timeout=90
            )
            await stack.enter_async_context(client)
            return Server(IN_PROCESS_URL, runtime, client, store)

        yield start


async def until_appended(
    server: Server, conversation_id: str, ready: Callable[[], Awaitable[T | None]]
) -> T:
    """``ready()``'s first answer that is not empty, asked again after each append to the
    conversation: no polling, no sleeping (see ``tests/engine/waits.py``)."""
    return await appended(server.store, conversation_id, ready)


class Followers:
    """The live streams following a server's sessions, counted as each subscribes to the
    runtime's progress and as it ends (both in the server's own tasks) and awaited as the
    count changes: a stream a test opens follows before the test goes on, without a pause
    that a loaded machine outlasts. Count from before the first stream opens."""

    def __init__(self, hub: ProgressHub) -> None:
        self.open = 0
        self._changed = asyncio.Event()
        subscribe, unsubscribe = hub.subscribe, hub.unsubscribe

        def subscribed(key: SessionKey) -> ProgressSubscription:
            self._moved(1)
            return subscribe(key)

        def unsubscribed(key: SessionKey, subscription: ProgressSubscription) -> None:
            unsubscribe(key, subscription)
            self._moved(-1)

        hub.subscribe = subscribed  # type: ignore[method-assign]
        hub.unsubscribe = unsubscribed  # type: ignore[method-assign]

    def _moved(self, by: int) -> None:
        self.open += by
        self._changed.set()

    async def until(self, count: int) -> None:
        """Until exactly ``count`` streams follow."""
        async with asyncio.timeout(60):
            while self.open != count:
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
async def serve(store: Store, clock: ManualClock) -> AsyncIterator[Callable[..., Any]]:
    started: list[tuple[uvicorn.Server, asyncio.Task[None], Runtime, httpx.AsyncClient]] = []

    async def start(
        agents: dict[str, Any],
        *,
        customize: Callable[[Any], None] | None = None,
        settings: dict[str, Any] | None = None,
        webhooks: Callable[[Runtime], Sequence[APIRouter]] | None = None,
        **options: Any,
    ) -> Server:
        """``customize(app)`` may add to the app before it serves (a test's own middleware);
        ``settings`` go to the runtime (``subagents=...``; the test's ``clock`` unless they
        name another), ``options`` to the app, with the ``webhooks`` made for the runtime."""
        runtime = Runtime(agents, store, **{**FAST, "clock": clock, **(settings or {})})
        hooks = webhooks(runtime) if webhooks is not None else ()
        app = create_app(runtime, manage_runtime=True, webhooks=hooks, **options)
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
