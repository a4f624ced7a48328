"""The MCP SDK's own client (``mcp.client.streamable_http``) as the tests of ``tether serve
--mcp`` use it: a session with a server's ``/mcp``, a call's progress messages, a result's
text and structured content."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

__all__ = ("Heard", "connected", "structured", "text", "tool_names")


@asynccontextmanager
async def connected(url: str, token: str | None = None) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with ``url``'s ``/mcp``, as ``token``'s bearer."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    timeout = httpx2.Timeout(30.0, read=90.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


class Heard:
    """The progress messages of one call (its ``progress_callback``)."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")


def text(result: mcp_types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, mcp_types.TextContent)
    return content.text


def structured(result: mcp_types.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return dict(result.structured_content)


async def tool_names(session: ClientSession) -> list[str]:
    return [tool.name for tool in (await session.list_tools()).tools]
