"""Records → the canonical stream: one slot index per message, never reused."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import quote

from pydantic import JsonValue

from tether.journal import SIGNAL_MEDIA_TYPE
from tether.messages import DataPart, TextPart, ThinkingPart, ToolResultPart
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    AttachmentRef,
    LogTruncated,
    Payload,
    Record,
    Signal,
    SteerReceived,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
    UserMessage,
)
from tether.stream._types import (
    Attachment,
    Author,
    DataContent,
    MessageContent,
    ReasoningContent,
    ReasoningContentDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolResponseContent,
)

__all__ = ("StreamProjector", "project", "stream_url")


def stream_url(agent: str, instance: str, session: str) -> str:
    """Where a session's stream is served over HTTP (``GET /agents/{agent}/{instance}``):
    the link a ``task_spawned`` or ``task_finished`` event gives to the child's own stream."""
    path = f"/agents/{quote(agent, safe='')}/{quote(instance, safe='')}"
    return f"{path}?session={quote(session, safe='')}"


# Records after which no slot of the execution can still be open.
_CLOSING = frozenset({"execution_ended", "execution_failed", "submission_settled"})


class StreamProjector:
    """Feeds on records in seq order and yields canonical stream events.

    A streamed assistant message opens a reasoning and/or a text slot (Start, Deltas, Done);
    everything else arrives whole (Full). Indexes count up from 0 across the conversation and
    are never reused, so a consumer can keep one map of slots for a whole session.

    Example::

        projector = StreamProjector()
        for record in await store.read(conversation_id):
            for event in projector.feed(record):
                print(event.model_dump_json(exclude_none=True))
    """

    def __init__(self) -> None:
        self._next_index = 0
        self._text_slot: int | None = None
        self._reasoning_slot: int | None = None
        self._streamed: set[str] = set()  # what the current message has streamed so far
        self._tool_names: dict[str, str] = {}
        self._children: dict[str, str] = {}  # a spawned child's stream URL, by submission id

    def feed(self, record: Record) -> list[StreamEvent]:
        payload = record.payload
        if record.kind in _CLOSING:
            self._streamed.clear()
            return self._close_all()
        handler = _HANDLERS.get(type(payload))
        return handler(self, payload) if handler is not None else []

    # --- streamed assistant messages ---------------------------------------------------------

    def _thinking_delta(self, payload: AssistantThinkingDelta) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if self._reasoning_slot is None:
            self._reasoning_slot = self._claim()
            self._streamed.add("reasoning")
            start = ReasoningContent(author="agent", summary=[], content=[""])
            events.append(StreamTaskMessageStart(content=start, index=self._reasoning_slot))
        delta = ReasoningContentDelta(content_index=0, content_delta=payload.text)
        events.append(StreamTaskMessageDelta(delta=delta, index=self._reasoning_slot))
        return events

    def _text_delta(self, payload: AssistantTextDelta) -> list[StreamEvent]:
        events: list[StreamEvent] = self._close_reasoning()  # reasoning comes before the answer
        if self._text_slot is None:
            self._text_slot = self._claim()
            self._streamed.add("text")
            start = TextContent(author="agent", content="", format="markdown")
            events.append(StreamTaskMessageStart(content=start, index=self._text_slot))
        delta = TextDelta(text_delta=payload.text)
        events.append(StreamTaskMessageDelta(delta=delta, index=self._text_slot))
        return events

    def _completed(self, payload: AssistantMessageCompleted) -> list[StreamEvent]:
        streamed, self._streamed = self._streamed, set()
        events = self._close_all()
        if payload.interrupted or payload.purpose == "summary":
            return events  # a cut stream is closed as it stands; summaries are not transcript
        parts = payload.message.parts
        thinking = [p.text for p in parts if isinstance(p, ThinkingPart) and p.text]
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        if thinking and "reasoning" not in streamed:
            content = ReasoningContent(author="agent", summary=[], content=thinking)
            events.append(self._full(content))
        if text and "text" not in streamed:
            events.append(self._full(TextContent(author="agent", content=text, format="markdown")))
        # The model's tool requests are part of its message, whoever runs the tools (the host
        # journals an intent later; a harness running its own tools only reports results).
        for part in payload.message.tool_calls:
            self._tool_names[part.call_id] = part.name
            request = ToolRequestContent(
                author="agent", name=part.name, tool_call_id=part.call_id, arguments=part.args
            )
            events.append(self._full(request))
        return events

    # --- whole messages ----------------------------------------------------------------------

    def _user(self, payload: UserMessage | SteerReceived) -> list[StreamEvent]:
        """A user message, whether it opened an execution or was steered into one."""
        attachments = [_attachment(ref) for ref in payload.attachments or ()] or None
        content = TextContent(author="user", content=payload.body, attachments=attachments)
        return [self._full(content)]

    def _signal(self, payload: Signal) -> list[StreamEvent]:
        return [self._data("user", "signal", payload)]

    def _tool_called(self, payload: ToolCalled) -> list[StreamEvent]:
        if payload.call_id in self._tool_names:
            return []  # announced with the message that asked for it
        self._tool_names[payload.call_id] = payload.tool
        content = ToolRequestContent(
            author="agent", name=payload.tool, tool_call_id=payload.call_id, arguments=payload.args
        )
        return [*self._close_all(), self._full(content)]

    def _tool_outcome(self, payload: ToolOutcome) -> list[StreamEvent]:
        result: JsonValue = payload.content if payload.data is None else payload.data
        content = ToolResponseContent(
            author="agent",
            name=self._tool_names.pop(payload.call_id, ""),
            tool_call_id=payload.call_id,
            content=result,
            is_error=payload.is_error or payload.status != "ok",
        )
        return [self._full(content)]

    def _log_truncated(self, payload: LogTruncated) -> list[StreamEvent]:
        """The history retention cut from the log's head, as the transcript it left: each
        message whole, so a reader of a truncated session still sees the conversation."""
        events: list[StreamEvent] = []
        for message in payload.messages:
            if message.role == "assistant":
                events += self._completed(AssistantMessageCompleted(call_id="", message=message))
                continue
            for part in message.parts:
                if isinstance(part, TextPart):
                    author: Author = "agent" if message.role == "system" else "user"
                    events.append(self._full(TextContent(author=author, content=part.text)))
                elif isinstance(part, ToolResultPart):
                    events += self._tool_outcome(
                        ToolOutcome(
                            call_id=part.call_id,
                            content=part.content,
                            data=part.data,
                            is_error=part.is_error,
                        )
                    )
                elif isinstance(part, DataPart):
                    data: dict[str, JsonValue] = {"kind": "data", "data": part.data}
                    if part.media_type == SIGNAL_MEDIA_TYPE and isinstance(part.data, dict):
                        data = {"kind": "signal", **part.data}
                    events.append(self._full(DataContent(author="user", data=data)))
        return events

    def _approval_requested(self, payload: ApprovalRequested) -> list[StreamEvent]:
        return [self._data("agent", "approval_requested", payload)]

    def _approval_decided(self, payload: ApprovalDecided) -> list[StreamEvent]:
        return [self._data("user", "approval_decided", payload)]

    def _task_spawned(self, payload: TaskSpawned) -> list[StreamEvent]:
        """A child submission spawned by a task call: its ids, agent and stream URL."""
        url = stream_url(payload.agent, payload.instance, payload.session)
        self._children[payload.child_submission_id] = url
        return [self._data("agent", "task_spawned", payload, streamUrl=url)]

    def _task_finished(self, payload: TaskFinished) -> list[StreamEvent]:
        """A child's end as its parent recorded it (status, result or error, usage)."""
        url = self._children.pop(payload.child_submission_id, None)
        extra: dict[str, JsonValue] = {} if url is None else {"streamUrl": url}
        return [self._data("agent", "task_finished", payload, **extra)]

    # --- slots -------------------------------------------------------------------------------

    def _claim(self) -> int:
        index, self._next_index = self._next_index, self._next_index + 1
        return index

    def _full(self, content: MessageContent) -> StreamEvent:
        return StreamTaskMessageFull(content=content, index=self._claim())

    def _data(self, author: Author, kind: str, payload: Payload, **extra: JsonValue) -> StreamEvent:
        data: dict[str, JsonValue] = {"kind": kind, **payload.to_json_object(), **extra}
        return self._full(DataContent(author=author, data=data))

    def _close_reasoning(self) -> list[StreamEvent]:
        if self._reasoning_slot is None:
            return []
        done, self._reasoning_slot = self._reasoning_slot, None
        return [StreamTaskMessageDone(index=done)]

    def _close_all(self) -> list[StreamEvent]:
        events = self._close_reasoning()
        if self._text_slot is not None:
            events.append(StreamTaskMessageDone(index=self._text_slot))
            self._text_slot = None
        return events


def _attachment(ref: AttachmentRef) -> Attachment:
    return Attachment(file_id=ref.digest, name=ref.digest, size=ref.size, type=ref.media_type)


_HANDLERS: dict[type[Payload], Callable[[StreamProjector, Any], list[StreamEvent]]] = {
    AssistantThinkingDelta: StreamProjector._thinking_delta,
    AssistantTextDelta: StreamProjector._text_delta,
    AssistantMessageCompleted: StreamProjector._completed,
    UserMessage: StreamProjector._user,
    SteerReceived: StreamProjector._user,
    Signal: StreamProjector._signal,
    ToolCalled: StreamProjector._tool_called,
    ToolOutcome: StreamProjector._tool_outcome,
    ApprovalRequested: StreamProjector._approval_requested,
    ApprovalDecided: StreamProjector._approval_decided,
    TaskSpawned: StreamProjector._task_spawned,
    TaskFinished: StreamProjector._task_finished,
    LogTruncated: StreamProjector._log_truncated,
}


def project(records: Iterable[Record]) -> Iterator[StreamEvent]:
    """The canonical stream of a log (or of any seq-ordered run of it from seq 1).

    Example::

        events = list(project(await store.read(conversation_id)))
    """
    projector = StreamProjector()
    for record in records:
        yield from projector.feed(record)
