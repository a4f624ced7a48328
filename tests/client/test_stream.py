"""Reading SSE frames and where to resume: an event is handed over only once its frame is
complete, and only then does ``Last-Event-ID`` move past it."""

from __future__ import annotations

from tether.client import Backoff
from tether.client._stream import Follow


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
