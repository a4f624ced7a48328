"""Reading SSE frames and where to resume: an event is handed over only once its frame is
complete, and only then does ``Last-Event-ID`` move past it; a lost stream is reopened from
there (answers scripted on an ``httpx.MockTransport``: the real server's restart is
tests/client/test_server.py)."""

from __future__ import annotations

import httpx
import pytest

from tether.client import AsyncTetherClient, Backoff, TetherClient
from tether.client._stream import Follow
from tether.errors import UnknownAgent
from tether.stream import StreamTaskMessageFull


def follow() -> Follow[str]:
    return Follow("assistant", "ann", lambda data: data, "stream")


def test_an_event_is_handed_over_when_its_frame_ends() -> None:
    state = follow()
    lines = ["retry: 2000", "id: 3:0", "event: start", "data: {}", ": heartbeat"]
    assert [state.feed(line) for line in lines] == [None] * len(lines)
    assert state.last_event_id is None
    item = state.feed("")
    assert item is not None and (item.id, item.event, item.data) == ("3:0", "start", "{}")
    assert state.last_event_id == "3:0"


def test_a_frame_cut_short_is_dropped_and_asked_for_again() -> None:
    state = follow()
    for line in ["id: 1:0", "event: full", "data: {}", ""]:
        state.feed(line)
    for line in ["id: 2:0", "event: full"]:  # the connection is lost here
        state.feed(line)
    assert state.headers()["Last-Event-ID"] == "1:0"
    assert state.feed("data: {}") is None
    assert state.feed("") is None  # what was read before the reconnection is forgotten


def test_progress_frames_have_no_id_and_are_not_handed_over() -> None:
    state = follow()
    for line in ["event: progress", 'data: {"type": "tool_progress"}']:
        state.feed(line)
    assert state.feed("") is None and state.last_event_id is None


def test_data_lines_join_and_the_request_names_the_view() -> None:
    state = Follow("a b", "c/d", lambda data: data, "records", follow=False, after=4)
    for line in ["id: 5", "data: one", "data:two"]:
        state.feed(line)
    item = state.feed("")
    assert item is not None and item.data == "one\ntwo"
    assert state.path == "/agents/a%20b/c%2Fd"
    assert state.params() == {"session": "default", "view": "records", "after": 4}


def test_backoff_doubles_to_its_most() -> None:
    delay = Backoff(first=0.5, most=2.0).delays()
    assert [delay() for _ in range(5)] == [0.5, 1.0, 2.0, 2.0, 2.0]


FULL = b'{"type":"full","index":0,"content":{"type":"text","author":"agent","content":"hi"}}'


def frame(event_id: str, event: str, data: bytes) -> bytes:
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (event_id.encode(), event.encode(), data)


def scripted() -> tuple[list[str | None], httpx.MockTransport]:
    """Refused, then answered 503, then cut in the middle of a frame, then the rest: the
    ``Last-Event-ID`` of each request asked, and the transport that answers them."""
    asked: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("Last-Event-ID"))
        if len(asked) == 1:
            raise httpx.ConnectError("refused", request=request)
        if len(asked) == 2:
            envelope = {"error": {"type": "runtime_closed", "message": "closing"}}
            return httpx.Response(503, json=envelope)
        if len(asked) == 3:
            cut = b"id: 2:0\nevent: full\n"  # the rest never came
            return httpx.Response(200, content=b"retry: 2000\n" + frame("1:0", "full", FULL) + cut)
        done = b'{"type":"done","index":0}'
        return httpx.Response(200, content=frame("2:0", "full", FULL) + frame("3:0", "done", done))

    return asked, httpx.MockTransport(answer)


QUICK = Backoff(first=0.0, most=0.0, give_up_after=60)


def test_a_lost_stream_is_reopened_after_the_last_event_handed_over() -> None:
    asked, transport = scripted()
    with TetherClient(transport=transport, backoff=QUICK) as client:
        live = client.stream("assistant", "ann")
        items = [next(live) for _ in range(3)]
        live.close()
    assert [item.id for item in items] == ["1:0", "2:0", "3:0"]
    assert isinstance(items[0].data, StreamTaskMessageFull)
    assert asked == [None, None, None, "1:0"]


async def test_the_async_stream_is_reopened_alike() -> None:
    asked, transport = scripted()
    async with AsyncTetherClient(transport=transport, backoff=QUICK) as client:
        live = client.stream("assistant", "ann")
        items = [await anext(live) for _ in range(3)]
        await live.aclose()
    assert [item.id for item in items] == ["1:0", "2:0", "3:0"]
    assert asked == [None, None, None, "1:0"]


def test_a_stream_that_cannot_be_reopened_raises_its_last_failure() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    never = Backoff(first=0.0, most=0.0, give_up_after=0.0)
    with TetherClient(transport=httpx.MockTransport(refuse), backoff=never) as client:
        with pytest.raises(httpx.ConnectError):
            next(client.stream("assistant", "ann"))

    def missing(request: httpx.Request) -> httpx.Response:
        envelope = {"error": {"type": "unknown_agent", "message": "no agent named 'x'"}}
        return httpx.Response(404, json=envelope)

    with TetherClient(transport=httpx.MockTransport(missing), backoff=never) as client:
        with pytest.raises(UnknownAgent):  # not retried: asking again changes nothing
            next(client.stream("x", "ann"))
