"""A counting proxy for PostgreSQL's wire protocol: what a client sends, statement by statement.

The server here has no ``pg_stat_statements`` loaded (it needs a restart), so the benchmark
counts on the wire instead, the same for every client library: point a client at
``Proxy.port`` and it reaches the real server through this proxy, which reads (never changes)
the frontend and backend messages:

- a **statement** is a simple ``Query`` or an extended-protocol ``Execute`` (its text from
  the ``Parse`` its portal was bound to, named prepared statements included);
- a **round trip** is a turn of the conversation: the client sending after the server last
  spoke (asynchronous notifications, notices and parameter changes aside), so a pipeline's
  many statements sent before reading count once;
- a **commit** ends a transaction: ``COMMIT`` (a ``ReadyForQuery`` going from in-transaction
  to idle), or a statement run in autocommit (idle to idle); it is a **write** commit when a
  statement in it inserts, updates, deletes or locks rows (the commits that wait for the WAL).

It answers ``SSLRequest`` and ``GSSENCRequest`` with "no" itself, so the stream stays plain.
Proxied connections add a hop: time nothing through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

__all__ = ("Proxy", "Statement", "Tally", "label", "normalized", "proxied", "recording", "through")

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
ASYNC_FROM_SERVER = {ord("A"), ord("N"), ord("S")}  # notification, notice, parameter status
_WRITES = re.compile(
    r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|FOR\s+(NO\s+KEY\s+)?UPDATE|FOR\s+(KEY\s+)?SHARE)\b",
    re.IGNORECASE,
)


@dataclass(slots=True)
class Statement:
    at: float
    source: str
    """The proxy's name: whose connections these are."""
    connection: int
    text: str


@dataclass(slots=True)
class Tally:
    """What the proxied clients sent, summed over every connection."""

    statements: int = 0
    round_trips: int = 0
    commits: int = 0
    write_commits: int = 0
    rollbacks: int = 0
    connections: int = 0
    by_text: Counter[str] = field(default_factory=Counter)

    def copy(self) -> Tally:
        return Tally(
            self.statements,
            self.round_trips,
            self.commits,
            self.write_commits,
            self.rollbacks,
            self.connections,
            Counter(self.by_text),
        )

    def __sub__(self, other: Tally) -> Tally:
        return Tally(
            self.statements - other.statements,
            self.round_trips - other.round_trips,
            self.commits - other.commits,
            self.write_commits - other.write_commits,
            self.rollbacks - other.rollbacks,
            self.connections - other.connections,
            self.by_text - other.by_text,
        )


def normalized(text: str) -> str:
    return " ".join(text.split())


def label(text: str) -> str:
    """A statement's class: its verbs and the tables they touch, in order, e.g.
    ``UPDATE submissions + INSERT attempts (+notify)``; the short commands as they are."""
    flat = normalized(text)
    if flat.strip("; ") == "":
        return "(empty statement: a pool's ping)"
    head = flat.split(" ", 1)[0].upper().rstrip(";")
    if head in {"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "LISTEN", "UNLISTEN"}:
        return head
    if head in {"SET", "SHOW", "RESET"}:
        return f"{head} {flat.split(' ')[1] if ' ' in flat else ''}".strip()
    found: list[str] = []
    for match in re.finditer(
        r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(?:ONLY\s+)?\"?([\w.]+)\"?", flat, re.I
    ):
        verb = match.group(1).split()[0].upper()
        before = flat[: match.start()].rstrip().upper()
        if verb == "UPDATE" and (before.endswith("FOR") or match.group(2).upper() == "SET"):
            continue  # FOR UPDATE (a lock) or ON CONFLICT DO UPDATE SET: no write of its own
        found.append(f"{verb} {match.group(2).rsplit('.', 1)[-1]}")
    if not found:
        table = re.search(r"\bFROM\s+(?:ONLY\s+)?\"?([\w.]+)\"?", flat, re.I)
        found.append(f"SELECT {table.group(1).rsplit('.', 1)[-1]}" if table else "SELECT")
    tags = []
    if re.search(r"\bFOR\s+(NO\s+KEY\s+)?UPDATE\b|\bFOR\s+(KEY\s+)?SHARE\b", flat, re.I):
        tags.append("locks")
    if re.search(r"pg_notify|\bNOTIFY\b", flat, re.I):
        tags.append("notify")
    if re.search(r"pg_advisory|pg_try_advisory", flat, re.I):
        tags.append("advisory lock")
    unique = list(dict.fromkeys(found))
    return " + ".join(unique) + (f" ({', '.join(tags)})" if tags else "")


class _Connection:
    def __init__(self, proxy: Proxy, number: int) -> None:
        self.proxy = proxy
        self.number = number
        self.prepared: dict[str, str] = {}
        self.portals: dict[str, str] = {}
        self.server_spoke = True  # the first message after the handshake is a turn
        self.status = b"I"
        self.writes = False
        self.statements_since_ready = 0
        self.ended_by: str | None = None

    # -- client -> server ------------------------------------------------------------------

    def from_client(self, kind: int, body: bytes) -> None:
        tally = self.proxy.tally
        if kind == ord("X"):
            return
        if self.server_spoke:
            tally.round_trips += 1
            self.server_spoke = False
        if kind == ord("Q"):
            self._statement(body.split(b"\0", 1)[0].decode("utf-8", "replace"))
        elif kind == ord("P"):
            statement, rest = body.split(b"\0", 1)
            text = rest.split(b"\0", 1)[0].decode("utf-8", "replace")
            self.prepared[statement.decode()] = text
        elif kind == ord("B"):
            portal, rest = body.split(b"\0", 1)
            bound = rest.split(b"\0", 1)[0].decode()
            self.portals[portal.decode()] = self.prepared.get(bound, "?")
        elif kind == ord("E"):
            executed = body.split(b"\0", 1)[0].decode()
            self._statement(self.portals.get(executed, "?"))
        elif kind == ord("C") and body[:1] == b"S":
            self.prepared.pop(body[1:].split(b"\0", 1)[0].decode(), None)

    def _statement(self, text: str) -> None:
        tally = self.proxy.tally
        tally.statements += 1
        tally.by_text[text] += 1
        self.statements_since_ready += 1
        head = text.lstrip()[:8].upper()
        if head.startswith(("COMMIT", "END")):
            self.ended_by = "commit"
        elif head.startswith(("ROLLBACK", "ABORT")):
            self.ended_by = "rollback"
        if _WRITES.search(text):
            self.writes = True
        if self.proxy.recording is not None:
            self.proxy.recording.append(
                Statement(time.monotonic(), self.proxy.name, self.number, text)
            )

    # -- server -> client ------------------------------------------------------------------

    def from_server(self, kind: int, body: bytes) -> None:
        if kind not in ASYNC_FROM_SERVER:
            self.server_spoke = True
        if kind != ord("Z"):
            return
        status, previous = body[:1], self.status
        self.status = status
        tally = self.proxy.tally
        if status == b"I" and (previous != b"I" or self.statements_since_ready):
            if previous == b"I" or self.ended_by == "commit":
                tally.commits += 1
                tally.write_commits += self.writes
            else:
                tally.rollbacks += 1
            self.writes = False
            self.ended_by = None
        self.statements_since_ready = 0


class Proxy:
    """A listening proxy to ``upstream`` (host, port); ``tally`` sums what passes."""

    def __init__(self, upstream: tuple[str, int], name: str = "") -> None:
        self.upstream, self.name = upstream, name
        self.tally = Tally()
        self.lock = threading.Lock()
        """Held while the proxy's thread counts: ``snapshot`` reads under it."""
        self.recording: list[Statement] | None = None
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def snapshot(self) -> Tally:
        with self.lock:
            return self.tally.copy()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._connections += 1
        with self.lock:
            self.tally.connections += 1
        connection = _Connection(self, self._connections)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            startup = await self._startup(reader, writer)
            if startup is None:
                return
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            upstream_writer.write(startup)
            await asyncio.gather(
                self._pump(reader, upstream_writer, connection.from_client, self.lock),
                self._pump(upstream_reader, writer, connection.from_server, self.lock),
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the proxy is closing: end quietly (asyncio logs a cancelled callback task)
        finally:
            self._tasks.discard(task)
            for end in (writer, upstream_writer):
                if end is not None:
                    end.close()

    @staticmethod
    async def _startup(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes | None:
        while True:
            (length,) = struct.unpack("!I", await reader.readexactly(4))
            body = await reader.readexactly(length - 4)
            (code,) = struct.unpack("!I", body[:4])
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                writer.write(b"N")
                await writer.drain()
                continue
            return struct.pack("!I", length) + body

    @staticmethod
    async def _pump(
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        seen: Callable[[int, bytes], None],
        lock: threading.Lock,
    ) -> None:
        buffer = b""
        try:
            while chunk := await reader.read(65536):
                buffer += chunk
                start = 0
                with lock:
                    while len(buffer) - start >= 5:
                        kind = buffer[start]
                        (length,) = struct.unpack_from("!I", buffer, start + 1)
                        end = start + 1 + length
                        if end > len(buffer):
                            break
                        seen(kind, buffer[start + 5 : end])
                        start = end
                writer.write(buffer[:start])
                buffer = buffer[start:]
                await writer.drain()
        finally:
            if buffer:
                writer.write(buffer)
            with contextlib.suppress(OSError, RuntimeError):
                writer.write_eof()


def through(url: str, port: int) -> str:
    """``url`` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{credentials}127.0.0.1:{port}"))


@contextlib.contextmanager
def recording(*proxies: Proxy) -> Iterator[list[Statement]]:
    """Every statement the ``proxies`` pass while inside, in the order they saw them."""
    statements: list[Statement] = []
    for proxy in proxies:
        with proxy.lock:
            proxy.recording = statements
    try:
        yield statements
    finally:
        for proxy in proxies:
            with proxy.lock:
                proxy.recording = None


@contextlib.contextmanager
def proxied(url: str, name: str = "") -> Iterator[Proxy]:
    """A proxy to the server ``url`` names, serving from a thread of its own (a synchronous
    client on the caller's event loop, DBOS's, must not stop it), closed on the way out."""
    parts = urlsplit(url)
    proxy = Proxy((parts.hostname or "127.0.0.1", parts.port or 5432), name)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name=f"pgwire-{name}", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(proxy.start(), loop).result(10)
        yield proxy
    finally:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
