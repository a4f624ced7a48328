"""A webhook receiver on 127.0.0.1: a plain asyncio HTTP/1.1 server that answers each POST
with the next status of its script (then 200) and hands every request to the test through
a queue, so a test awaits a delivery instead of polling for it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

WAIT = 60
"""Seconds a test waits for a delivery: room for a loaded machine."""


@dataclass(frozen=True)
class Received:
    """One request as the receiver read it (header names lower-case)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    """What the receiver answered."""


@dataclass
class Receiver:
    """The server's address and what it got."""

    url: str
    statuses: list[int] = field(default_factory=list)
    received: asyncio.Queue[Received] = field(default_factory=asyncio.Queue)
    log: list[Received] = field(default_factory=list)

    async def next(self) -> Received:
        """The next request, awaited (at most :data:`WAIT` seconds)."""
        async with asyncio.timeout(WAIT):
            return await self.received.get()


@contextlib.asynccontextmanager
async def webhook_receiver(statuses: Iterable[int] = ()) -> AsyncIterator[Receiver]:
    """Serve on an ephemeral loopback port until the block ends."""
    receiver = Receiver(url="", statuses=list(statuses))
    writers: set[asyncio.StreamWriter] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.add(writer)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (header := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = header.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                writer.write(f"HTTP/1.1 {status} X\r\ncontent-length: 2\r\n\r\nok".encode())
                await writer.drain()
                got = Received(method, path, headers, body, status)
                receiver.log.append(got)
                receiver.received.put_nowait(got)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writers.discard(writer)
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    receiver.url = f"http://127.0.0.1:{port}/hooks/tether"
    try:
        yield receiver
    finally:
        server.close()
        for writer in list(writers):  # a client's kept-alive connection ends with the server
            writer.close()
        await server.wait_closed()
