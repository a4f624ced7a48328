"""Following a session's SSE stream across disconnects: the frames read from its lines, and
where to resume (``Last-Event-ID``), shared by both clients, which only do the I/O.

Each event is handed over once its frame is complete (a blank line ends it), and only then
does the resume point move past it: a connection lost in the middle of a frame resends that
frame, and one lost between frames resends nothing. The server resumes strictly after the
id it is given (docs/serving.md), so nothing is seen twice and nothing is missed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import TypeAdapter

from tether.client._call import path
from tether.client._errors import error_from_response

if TYPE_CHECKING:
    from tether.records import Record
    from tether.stream import StreamEvent

__all__ = (
    "RECONNECT",
    "STREAM_IDLE",
    "Backoff",
    "Follow",
    "Retry",
    "Streamed",
    "canonical_event",
    "stored_record",
)

T = TypeVar("T")

STREAM_IDLE = 60.0
"""Seconds a stream may send nothing before it counts as lost: the server sends a
heartbeat every 15 s, so only a connection that died without closing stays this quiet."""

# The stream's and the log's types are loaded once a stream is read, not with the client:
# what only sends requests (the ``tether`` CLI's commands) never needs them.


@functools.cache
def _events() -> TypeAdapter[StreamEvent]:
    from tether.stream import StreamEvent

    return TypeAdapter(StreamEvent)


def canonical_event(data: str) -> StreamEvent:
    """A canonical stream event (``view=stream``) from its frame's data."""
    return _events().validate_json(data)


def stored_record(data: str) -> Record:
    """A record (``view=records``) from its frame's data: as stored, hashes and all."""
    from tether.records import decode_record

    return decode_record(data)


class Retry(Exception):
    """A stream's answer worth asking again (503: the server is starting or stopping)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class Streamed(Generic[T]):
    """One event of a followed stream: its SSE ``id`` (what ``Last-Event-ID`` resumes
    after: ``<seq>`` for a record, ``<seq>:<n>`` for the n-th event projected from one; with
    subagents, each open child's position too), its SSE ``event`` name (a record's kind, an
    event's type) and what it holds."""

    id: str
    event: str
    data: T


@dataclass(frozen=True)
class Backoff:
    """How a lost stream is reopened: after ``first`` seconds, doubling up to ``most``, for
    as long as ``give_up_after`` seconds pass without a connection (then the last failure
    is raised). A connection that opens starts the delays again."""

    first: float = 0.1
    most: float = 2.0
    give_up_after: float = 60.0

    def delays(self) -> Callable[[], float]:
        delay = self.first

        def next_delay() -> float:
            nonlocal delay
            current, delay = delay, min(delay * 2, self.most)
            return current

        return next_delay


RECONNECT = Backoff()
"""How a client reopens a lost stream unless told otherwise."""


@dataclass
class Follow(Generic[T]):
    """The state of one followed stream: the request to (re)open it and the frame being
    read. ``feed`` takes each line of the body and returns the event a blank line
    completes, if it has an ``id`` (progress frames have none and are skipped: they are
    not kept, so no resume could give them back)."""

    agent: str
    instance: str
    decode: Callable[[str], T]
    view: str
    session: str = "default"
    follow: bool = True
    after: int = 0
    children: bool = False
    last_event_id: str | None = None
    _id: str | None = field(default=None, repr=False)
    _event: str = field(default="message", repr=False)
    _data: list[str] = field(default_factory=list, repr=False)

    @property
    def path(self) -> str:
        return path("/agents/{}/{}", self.agent, self.instance)

    def params(self) -> dict[str, str | int | bool]:
        params: dict[str, str | int | bool] = {"session": self.session, "view": self.view}
        if self.follow:
            params["follow"] = True
        if self.after:
            params["after"] = self.after
        if self.children:
            params["children"] = True
        return params

    def headers(self) -> dict[str, str]:
        """The request's headers: ``Last-Event-ID`` once an event was handed over (or the
        caller named one), and a frame read halfway dropped, to be sent again whole."""
        self._reset()
        headers = {"Accept": "text/event-stream"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = self.last_event_id
        return headers

    def refusal(self, status: int, content: bytes) -> Exception:
        """What an error answer to the stream's request raises: its typed error, or
        :class:`Retry` for a 503 (the server is starting or stopping: ask again)."""
        error = error_from_response(status, content)
        return Retry(error) if status == 503 else error

    def _reset(self) -> None:
        self._id, self._event, self._data = None, "message", []

    def feed(self, line: str) -> Streamed[T] | None:
        if line == "":
            complete = self._id, self._event, self._data
            self._reset()
            event_id, event, data = complete
            if event_id is None or not data:
                return None
            streamed = Streamed(event_id, event, self.decode("\n".join(data)))
            self.last_event_id = event_id
            return streamed
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            self._id = value
        elif name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None
