"""One execution's connection to an MCP server, supervised: opened when first needed, opened
again after the server went away (its process crashed, its socket closed), and closed when
the run ends, which for a stdio server stops its process.

The connection lives in a task of its own, which enters the SDK's client (and so its
transport: for stdio, the server's process) and leaves it, as anyio requires, in the same
task; calls made from any task of the run go through the client it opened. Whether the
server was gone before a call was sent or went away during it is told apart by watching
the transport's read stream: it ends when the server does, and a call that finds it ended
was never sent (the server is started again and the call made), while one under way when
it ended may or may not have acted (the caller decides: see ``tools/_mcp.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from tether.errors import McpServerUnavailable, McpToolsChanged

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult

__all__ = ("Interrupted", "McpConnection", "Transport", "normalized_listing")

Transport = Callable[[], AbstractAsyncContextManager[Any]]
"""Makes a fresh SDK transport (an async context manager of a read and a write stream)."""


class Interrupted(Exception):
    """The server went away, or stopped answering, while a call was under way: it may have
    acted on it."""


class _WatchedReadStream:
    """The transport's read stream, setting ``ended`` once it ends (the server went away)."""

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    def __getattr__(self, name: str) -> Any:  # ``last_context`` and the like
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        self._ended.set()
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched(transport: Transport, ended: asyncio.Event) -> AsyncIterator[Any]:
    async with transport() as (read, write):
        yield _WatchedReadStream(read, ended), write


def normalized_listing(tools: list[Any]) -> list[JsonValue]:
    """A listing as the step records it: each tool's name, description, input schema and
    annotations (what the model is offered and the policy reads), in name order."""
    listed: list[JsonValue] = []
    for tool in sorted(tools, key=lambda t: str(t.name)):
        entry: dict[str, JsonValue] = {
            "name": tool.name,
            "description": tool.description or "",
            "inputSchema": tool.input_schema,
        }
        if tool.annotations is not None:
            entry["annotations"] = tool.annotations.model_dump(
                mode="json", by_alias=True, exclude_none=True
            )
        listed.append(entry)
    return listed


class _Open:
    """One opening of the server: its client, and the event its read stream's end sets."""

    def __init__(self) -> None:
        self.ended = asyncio.Event()
        self.stop = asyncio.Event()
        self.ready: asyncio.Future[tuple[Client, list[JsonValue]]] = (
            asyncio.get_running_loop().create_future()
        )
        self.task: asyncio.Task[None] | None = None


class McpConnection:
    """An execution's supervised connection to one MCP server (see the module's docstring).

    ``expected`` is the listing the execution recorded: every opening compares the server's
    listing with it, and a difference raises :class:`~tether.errors.McpToolsChanged`.
    ``opened`` counts the openings (a restart makes one more)."""

    def __init__(
        self,
        server: str,
        transport: Transport,
        *,
        execution_id: str,
        select: Callable[[list[JsonValue]], list[JsonValue]],
        timeout: float | None,
        start_timeout: float,
    ) -> None:
        self.server = server
        self.execution_id = execution_id
        self.expected: list[JsonValue] | None = None
        self.opened = 0
        self._transport = transport
        self._select = select
        self._timeout = timeout
        self._start_timeout = start_timeout
        self._open: _Open | None = None
        self._lock = asyncio.Lock()

    async def listing(self) -> list[JsonValue]:
        """The server's listing now (opening the connection if need be)."""
        _, listing = await self._client()
        return listing

    async def call(
        self,
        name: str,
        arguments: dict[str, JsonValue],
        sink: Callable[[str], Awaitable[None]] | None = None,
    ) -> CallToolResult:
        """Call a tool, passing the server's progress notifications to ``sink`` as text.
        A server found gone before the call is started again first; one that goes away
        during it (or a call past ``timeout``) raises :class:`Interrupted`."""
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        client, _ = await self._client()
        current = self._open

        async def notified(progress: float, total: float | None, message: str | None) -> None:
            if sink is not None:
                await sink(message or (f"{progress:g}/{total:g}" if total else f"{progress:g}"))

        try:
            async with asyncio.timeout(self._timeout):
                return await client.call_tool(name, arguments, progress_callback=notified)
        except TimeoutError:
            await self._drop(current)
            raise Interrupted(
                f"the MCP server {self.server!r} did not answer {name} within {self._timeout:g} s"
            ) from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise  # the server answered: an error, not an unknown
            await self._drop(current)
            raise Interrupted(f"the MCP server {self.server!r} went away during {name}") from None
        except Exception as exc:  # the transport failed under the call (a socket, a stream)
            await self._drop(current)
            raise Interrupted(
                f"the MCP server {self.server!r} could not be reached during {name}: "
                f"{type(exc).__name__}: {exc}"
            ) from None

    async def close(self) -> None:
        """Close the connection (for stdio, stop the server's process); harmless if closed."""
        async with self._lock:
            current, self._open = self._open, None
        await self._stop(current)

    async def _client(self) -> tuple[Client, list[JsonValue]]:
        async with self._lock:
            current = self._open
            if current is not None and (current.ended.is_set() or _finished(current)):
                await self._stop(current)  # the server went away: start it again
                current = self._open = None
            if current is None:
                current = self._open = _Open()
                current.task = asyncio.create_task(self._run(current))
                self.opened += 1
            try:
                async with asyncio.timeout(self._start_timeout):  # a handshake that never ends
                    client, listing = await asyncio.shield(current.ready)
            except TimeoutError:
                self._open = None
                await self._stop(current)
                raise McpServerUnavailable(
                    f"the MCP server {self.server!r} did not open within {self._start_timeout:g} s",
                    server=self.server,
                ) from None
            except BaseException:
                self._open = None
                await self._stop(current)
                raise
            if self.expected is not None and listing != self.expected:
                raise _changed(self.server, self.execution_id, self.expected, listing)
            return client, listing

    async def _run(self, current: _Open) -> None:
        """The connection's task: open the client, list the tools, wait for the stop."""
        from mcp import Client

        try:
            async with Client(_watched(self._transport, current.ended), mode="legacy") as client:
                listing = self._select(normalized_listing(await _all_tools(client)))
                current.ready.set_result((client, listing))
                await current.stop.wait()
        except BaseException as exc:
            if not current.ready.done() and not isinstance(exc, Exception):
                current.ready.cancel()  # stopped before it opened: nobody waits for it
            elif not current.ready.done():
                current.ready.set_exception(
                    McpServerUnavailable(
                        f"the MCP server {self.server!r} could not be opened: "
                        f"{type(exc).__name__}: {exc}",
                        server=self.server,
                    )
                )
            if not isinstance(exc, Exception):
                raise

    async def _drop(self, current: _Open | None) -> None:
        async with self._lock:
            if current is not None and self._open is current:
                self._open = None
        await self._stop(current)

    @staticmethod
    async def _stop(current: _Open | None) -> None:
        if current is None or current.task is None:
            return
        current.stop.set()
        if not current.ready.done():
            current.task.cancel()  # still opening: no stop would be heard
        await asyncio.wait({current.task})


def _finished(current: _Open) -> bool:
    return current.task is not None and current.task.done()


async def _all_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang the run
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _changed(
    server: str, execution_id: str, expected: list[JsonValue], listing: list[JsonValue]
) -> McpToolsChanged:
    def by_name(entries: list[JsonValue]) -> dict[str, JsonValue]:
        return {str(e["name"]): e for e in entries if isinstance(e, dict)}

    then, now = by_name(expected), by_name(listing)
    return McpToolsChanged(
        server,
        execution_id=execution_id,
        added=tuple(sorted(now.keys() - then.keys())),
        removed=tuple(sorted(then.keys() - now.keys())),
        changed=tuple(sorted(n for n in then.keys() & now.keys() if then[n] != now[n])),
    )
