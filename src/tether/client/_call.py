"""A request described once, for both clients to send: :class:`Call` (one request and how its
answer is read) and :data:`Flow` (several requests, each chosen from the answers before).

The sync and the async client each drive these: a call's method, path, query, body and
parser say everything but the I/O, so an operation is written once (``_operations``) and
each client only sends it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx
from pydantic import BaseModel

__all__ = ("Call", "Flow", "Query", "ask", "model", "path")

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

Query = Mapping[str, str | int | float | bool | None]
"""A request's query: a parameter that is None is not sent."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how its successful answer is read: ``parse(response)``. An error
    answer never reaches ``parse``: the client raises the envelope's typed error."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Query = field(default_factory=dict)
    body: BaseModel | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    waits: float | None = None
    """Seconds the server may hold the request (``?wait``): added to the client's timeout."""

    def timeout(self, default: httpx.Timeout) -> httpx.Timeout:
        """The request's timeout: the client's ``default``, its read longer by the seconds
        the server may hold the request."""
        if self.waits is None or default.read is None:
            return default
        return httpx.Timeout(
            connect=default.connect,
            read=default.read + self.waits,
            write=default.write,
            pool=default.pool,
        )

    def query(self) -> dict[str, str | int | float | bool]:
        return {name: value for name, value in self.params.items() if value is not None}

    def content(self) -> bytes | None:
        """The JSON body. Every POST says ``Content-Type: application/json``, with a body or
        without one (the server refuses one that does not), so a POST sends at least ``{}``."""
        if self.body is not None:
            # What the caller gave, null included (an answer may be null); the server's
            # defaults stand for the rest.
            return self.body.model_dump_json(by_alias=True, exclude_unset=True).encode()
        return b"{}" if self.method == "POST" else None

    def request_headers(self) -> dict[str, str]:
        sent = dict(self.headers)
        if self.method == "POST":
            sent["Content-Type"] = "application/json"
        return sent


Flow = Generator[Call[Any], Any, T]
"""An operation of several requests: it yields each :class:`Call` and is sent back what
the call's ``parse`` made of the answer; what it returns is the operation's result."""


def ask(call: Call[T]) -> Generator[Call[Any], Any, T]:
    """Send ``call`` from within a flow: ``page = yield from ask(call)``, typed."""
    return cast(T, (yield call))


def model(kind: type[M]) -> Callable[[httpx.Response], M]:
    """The parser of an answer whose body is ``kind`` (one of the wire models)."""

    def parse(response: httpx.Response) -> M:
        return kind.model_validate_json(response.content)

    return parse


def path(template: str, *segments: str) -> str:
    """``template`` with each ``{}`` filled by a segment, escaped (a ``/`` in a name too)."""
    return template.format(*(quote(segment, safe="") for segment in segments))
