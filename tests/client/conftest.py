"""The client against the app in this process (``served``: ``httpx.ASGITransport``, no
socket), for the many routes that answer and are done; ``tether serve`` processes for what
needs the real thing (tests/client/test_server.py)."""

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tether.client import AsyncTetherClient
from tether.engine import ManualClock, Runtime
from tether.http import create_app
from tether.store import MemoryStore

from ..engine.conftest import FAST

__all__ = ("Served", "served")

IN_PROCESS_URL = "http://tether.test"


@dataclass
class Served:
    runtime: Runtime
    client: AsyncTetherClient


@pytest.fixture
async def served(clock: ManualClock) -> AsyncIterator[Callable[..., Awaitable[Served]]]:
    """Start ``agents`` on an in-memory store (what is tested is the client, the same on
    every store) behind the app, and a client of it. ASGITransport hands a response over
    only once the app has written all of it, so a stream read here must end (not
    followed): a followed one is tested on a real server."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            agents: dict[str, Any], settings: dict[str, Any] | None = None, **options: Any
        ) -> Served:
            runtime = Runtime(agents, MemoryStore(), **{**FAST, "clock": clock, **(settings or {})})
            app = create_app(runtime, manage_runtime=True, **options)
            await stack.enter_async_context(app.router.lifespan_context(app))
            client = AsyncTetherClient(
                IN_PROCESS_URL, transport=httpx.ASGITransport(app=app), timeout=90
            )
            await stack.enter_async_context(client)
            return Served(runtime, client)

        yield start
