"""What the protocol views (AG-UI, the AI SDK's UI message stream) share: the canonical
stream cut into runs, one per submission, each opened by its first event and closed by its
settlement."""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

from tether.records import Record, SettlementStatus, SubmissionSettled
from tether.stream._project import StreamProjector
from tether.stream._types import (
    MessageContent,
    ReasoningContent,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    ToolRequestContent,
    ToolResponseContent,
)

__all__ = ("RunProjector", "WireEvent", "json_text")

WireEvent = dict[str, Any]
"""One event of a protocol view, as its JSON object."""

# Records that say a run began, though they show nothing themselves.
_OPENING = frozenset({"execution_started", "user_message"})


def json_text(value: JsonValue) -> str:
    """A tool's arguments or result as the text a protocol carries (a string as it is)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class RunProjector:
    """Feeds on records in seq order (as :class:`StreamProjector` does) and yields the
    events of a protocol view: a subclass says how each canonical event reads in it.

    ``submission``: show only that submission's run (what a POST that dispatched it
    streams back); the records before its first are projected silently, so slot indexes
    and message ids are those of the whole session's view. ``users``: show the users'
    messages too (a session's stream does; a reply to a chat request does not: the client
    has them). ``since``: with ``submission``, its records up to that seq are silent too
    (a run resumed after its interrupts were answered starts after the answers' records).
    ``done`` is set once that submission settled.
    """

    def __init__(
        self, *, submission: str | None = None, users: bool = True, since: int = 0
    ) -> None:
        self._canonical = StreamProjector()
        self._only = submission
        self._since = since
        self._users = users
        self._showing = submission is None
        self.run: str | None = None
        """The run open, by its id (the submission's), if one is."""
        self.thread = ""
        self.conversation = ""
        self.done = False
        self._loose = False  # the run open is of records no submission wrote
        self._slots: dict[int, str] = {}  # open slot index -> "text" | "reasoning"

    def feed(self, record: Record) -> list[WireEvent]:
        canonical = self._canonical.feed(record)
        if self.done:
            return []
        submission = record.submission_id
        if not self._showing:
            if submission != self._only or record.seq <= self._since:
                self._slots.update(_opened(canonical))
                for event in canonical:
                    if isinstance(event, StreamTaskMessageDone):
                        self._slots.pop(event.index or 0, None)
                    elif isinstance(event, StreamTaskMessageFull) and submission == self._only:
                        self.observe(event.content)
                return []
            self._showing = True
        self.thread, self.conversation = record.session, record.conversation_id
        events: list[WireEvent] = []
        settled = record.payload if record.kind == SubmissionSettled.KIND else None
        if self._loose and submission is not None:
            # What no submission wrote (a retention cut's transcript) ends before one begins.
            events += self.run_ended(SubmissionSettled(status=SettlementStatus.SUCCEEDED))
            self.run, self._loose = None, False
        if self.run is None and (canonical or record.kind in _OPENING) and not self.done:
            self.run = submission or f"{record.conversation_id}:{record.seq}"
            self._loose = submission is None
            events += self.run_started()
        for event in canonical:
            events += self._event(event)
        if isinstance(settled, SubmissionSettled) and self.run is not None:
            events += self.run_ended(settled)
            self.run = None
            if self._only is None or submission == self._only:
                self.done = self._only is not None
        return events

    def observe(self, content: MessageContent) -> None:
        """A whole message of the submission shown, in the records before it is shown
        (a resumed run's: what it asked, which its answers and results refer to)."""

    def close(self) -> list[WireEvent]:
        """What ends a stream that stops with its run still open (parked for a person):
        nothing here; AG-UI ends the run as interrupted."""
        return []

    def _event(self, event: StreamEvent) -> list[WireEvent]:
        index = event.index if event.index is not None else -1
        mid = f"{self.conversation}#{index}"
        if isinstance(event, StreamTaskMessageStart):
            content = event.content
            if isinstance(content, ReasoningContent):
                self._slots[index] = "reasoning"
                return self.reasoning_start(mid)
            if isinstance(content, TextContent):
                self._slots[index] = "text"
                return self.text_start(mid, content.author)
            return []
        if isinstance(event, StreamTaskMessageDelta):
            delta = event.delta
            kind = self._slots.get(index)
            if delta is None or kind is None:
                return []
            text = getattr(delta, "text_delta", None)
            if text is None:
                text = getattr(delta, "content_delta", None) or getattr(
                    delta, "summary_delta", None
                )
            if not text:
                return []
            return (
                self.reasoning_delta(mid, text)
                if kind == "reasoning"
                else self.text_delta(mid, text)
            )
        if isinstance(event, StreamTaskMessageDone):
            kind = self._slots.pop(index, None)
            if kind == "reasoning":
                return self.reasoning_end(mid)
            return self.text_end(mid) if kind == "text" else []
        return self._whole(event, mid)

    def _whole(self, event: StreamTaskMessageFull, mid: str) -> list[WireEvent]:
        content = event.content
        if isinstance(content, TextContent):
            if content.author == "user" and not self._users:
                return []
            if content.author == "user" and not content.content:
                return []
            return [
                *self.text_start(mid, content.author),
                *(self.text_delta(mid, content.content) if content.content else []),
                *self.text_end(mid),
            ]
        if isinstance(content, ReasoningContent):
            text = "\n\n".join([*content.summary, *(content.content or [])])
            return [
                *self.reasoning_start(mid),
                *(self.reasoning_delta(mid, text) if text else []),
                *self.reasoning_end(mid),
            ]
        if isinstance(content, ToolRequestContent):
            return self.tool_call(content)
        if isinstance(content, ToolResponseContent):
            return self.tool_result(mid, content)
        kind = content.data.get("kind")
        if kind == "submission_settled" or (kind == "signal" and not self._users):
            return []  # the run's end says how it settled; a reply leaves out the sender's
        return self.data(mid, kind if isinstance(kind, str) else "data", content.data)

    # --- what a protocol says: overridden ------------------------------------------------

    def run_started(self) -> list[WireEvent]:
        raise NotImplementedError

    def run_ended(self, settled: SubmissionSettled) -> list[WireEvent]:
        raise NotImplementedError

    def text_start(self, mid: str, author: str) -> list[WireEvent]:
        raise NotImplementedError

    def text_delta(self, mid: str, text: str) -> list[WireEvent]:
        raise NotImplementedError

    def text_end(self, mid: str) -> list[WireEvent]:
        raise NotImplementedError

    def reasoning_start(self, mid: str) -> list[WireEvent]:
        raise NotImplementedError

    def reasoning_delta(self, mid: str, text: str) -> list[WireEvent]:
        raise NotImplementedError

    def reasoning_end(self, mid: str) -> list[WireEvent]:
        raise NotImplementedError

    def tool_call(self, request: ToolRequestContent) -> list[WireEvent]:
        raise NotImplementedError

    def tool_result(self, mid: str, response: ToolResponseContent) -> list[WireEvent]:
        raise NotImplementedError

    def data(self, mid: str, kind: str, data: dict[str, JsonValue]) -> list[WireEvent]:
        raise NotImplementedError


def _opened(events: list[StreamEvent]) -> dict[int, str]:
    opened: dict[int, str] = {}
    for event in events:
        if isinstance(event, StreamTaskMessageStart) and event.index is not None:
            if isinstance(event.content, ReasoningContent):
                opened[event.index] = "reasoning"
            elif isinstance(event.content, TextContent):
                opened[event.index] = "text"
    return opened
