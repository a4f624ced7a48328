"""Records → the canonical stream: one slot index per message, never reused; the answer that
supersedes a message a crash cut shares that message's id, not its index."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal
from urllib.parse import quote

from pydantic import JsonValue

from tether.journal import SIGNAL_MEDIA_TYPE, STREAM_DATA
from tether.messages import DataPart, TextPart, ThinkingPart, ToolResultPart
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    AssistantTextDelta,
    AssistantThinkingDelta,
    AttachmentRef,
    BudgetDecided,
    BudgetRequested,
    InputAnswered,
    InputRequested,
    LogTruncated,
    Payload,
    Record,
    Signal,
    SteerReceived,
    StepRecorded,
    SubmissionSettled,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
    UserMessage,
    VersionChanged,
)
from tether.stream._types import (
    Attachment,
    Author,
    DataContent,
    MessageContent,
    MessageDelta,
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TaskMessage,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolResponseContent,
)

__all__ = ("StreamProjector", "message_id", "project", "stream_url")


def stream_url(agent: str, instance: str, session: str) -> str:
    """Where a session's stream is served over HTTP (``GET /agents/{agent}/{instance}``):
    the link a ``task_spawned`` or ``task_finished`` event gives to the child's own stream."""
    path = f"/agents/{quote(agent, safe='')}/{quote(instance, safe='')}"
    return f"{path}?session={quote(session, safe='')}"


def message_id(conversation_id: str, index: int) -> str:
    """The ``parent_task_message.id`` of the message first streamed in slot ``index``: what
    an interrupted message and the answer that supersedes it (in a slot of its own) share."""
    return f"{conversation_id}#{index}"


# Records after which no slot of the execution can still be open.
_CLOSING = frozenset({"execution_ended", "execution_failed", "submission_settled"})

SlotKind = Literal["reasoning", "text"]


class StreamProjector:
    """Feeds on records in seq order and yields canonical stream events.

    A streamed assistant message opens a reasoning and/or a text slot (Start, Deltas, Done);
    everything else arrives whole (Full). Indexes count up from 0 across the conversation, so
    a consumer can keep one map of slots for a whole session.

    A message a crash cut mid-stream (an interrupted completion) is closed by a Done per slot
    whose ``parent_task_message`` is that message as it stood, with ``streaming_status``
    ``IN_PROGRESS``: it never finished. The answer the model call gives when it is asked
    again *supersedes* it: its text and reasoning come in fresh slots (an agentex server
    ignores any update to an index once it is Done), each a Start, or a Full if not streamed,
    whose ``parent_task_message`` has the cut message's ``id``, so a consumer that keys
    messages by id replaces the partial instead of showing the answer twice. No event reuses
    an index that was closed.

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
        self._summarized: set[int] = set()
        """Reasoning slots whose text is a summary of the reasoning."""
        self._message: dict[SlotKind, int] = {}  # the slots the current message streamed
        # By model call id: the slots of its interrupted message, until its answer takes them.
        self._cut: dict[str, dict[SlotKind, int]] = {}
        self._tool_names: dict[str, str] = {}
        self._children: dict[str, str] = {}  # a spawned child's stream URL, by submission id
        self._record: Record | None = None

    def feed(self, record: Record) -> list[StreamEvent]:
        self._record = record
        payload = record.payload
        if record.kind in _CLOSING:
            self._message.clear()
            closed = self._close_all()
            if isinstance(payload, SubmissionSettled):
                closed.append(self._settled(payload))
            return closed
        handler = _HANDLERS.get(type(payload))
        return handler(self, payload) if handler is not None else []

    # --- streamed assistant messages ---------------------------------------------------------

    def _thinking_delta(self, payload: AssistantThinkingDelta) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        if self._reasoning_slot is None:
            # As the taps open one: an empty reasoning message, streaming ("active").
            start = ReasoningContent(author="agent", summary=[], content=[], style="active")
            self._reasoning_slot, opened = self._open(payload.call_id, "reasoning", start)
            events.append(opened)
        if payload.summary:
            self._summarized.add(self._reasoning_slot)
            delta: MessageDelta = ReasoningSummaryDelta(summary_index=0, summary_delta=payload.text)
        else:
            delta = ReasoningContentDelta(content_index=0, content_delta=payload.text)
        events.append(StreamTaskMessageDelta(delta=delta, index=self._reasoning_slot))
        return events

    def _text_delta(self, payload: AssistantTextDelta) -> list[StreamEvent]:
        events: list[StreamEvent] = self._close_reasoning()  # reasoning comes before the answer
        if self._text_slot is None:
            start = TextContent(author="agent", content="", format="markdown")
            self._text_slot, opened = self._open(payload.call_id, "text", start)
            events.append(opened)
        delta = TextDelta(text_delta=payload.text)
        events.append(StreamTaskMessageDelta(delta=delta, index=self._text_slot))
        return events

    def _open(
        self, call_id: str, kind: SlotKind, content: MessageContent
    ) -> tuple[int, StreamEvent]:
        """A fresh slot of the current message; if a crash cut this model call's earlier
        answer, its Start names the cut message of its kind, which it supersedes."""
        superseded = self._cut.get(call_id, {}).pop(kind, None)
        index = self._message[kind] = self._claim()
        parent = (
            None if superseded is None else self._task_message(superseded, content, "IN_PROGRESS")
        )
        return index, StreamTaskMessageStart(
            content=content, index=index, parent_task_message=parent
        )

    def _completed(self, payload: AssistantMessageCompleted) -> list[StreamEvent]:
        streamed, self._message = self._message, {}
        if payload.interrupted:
            return self._interrupted(payload, streamed)
        events = self._close_all()
        cut = self._cut.pop(payload.call_id, {})  # what this answer does not take stays cut
        if payload.purpose == "summary":
            return events  # summaries are not transcript
        parts = payload.message.parts
        thinking = [p.text for p in parts if isinstance(p, ThinkingPart) and p.text]
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        if thinking and "reasoning" not in streamed:
            reasoning = ReasoningContent(
                author="agent", summary=[], content=thinking, style="static"
            )
            events.append(self._whole(reasoning, cut.get("reasoning")))
        if text and "text" not in streamed:
            answer = TextContent(author="agent", content=text, format="markdown")
            events.append(self._whole(answer, cut.get("text")))
        # The model's tool requests are part of its message, whoever runs the tools (the host
        # journals an intent later; a harness running its own tools only reports results).
        for part in payload.message.tool_calls:
            self._tool_names[part.call_id] = part.name
            request = ToolRequestContent(
                author="agent", name=part.name, tool_call_id=part.call_id, arguments=part.args
            )
            events.append(self._full(request))
        return events

    def _interrupted(
        self, payload: AssistantMessageCompleted, streamed: dict[SlotKind, int]
    ) -> list[StreamEvent]:
        """A cut stream, closed as it stands: a Done per slot the message streamed (one a
        Done closed already too, its reasoning), marked as never finished."""
        parts = payload.message.parts
        thinking = "".join(p.text for p in parts if isinstance(p, ThinkingPart))
        text = "".join(p.text for p in parts if isinstance(p, TextPart))
        events: list[StreamEvent] = []
        for kind, index in sorted(streamed.items(), key=lambda slot: slot[1]):
            content: MessageContent = (
                self._reasoning(thinking, summary=index in self._summarized)
                if kind == "reasoning"
                else TextContent(author="agent", content=text, format="markdown")
            )
            parent = self._task_message(index, content, "IN_PROGRESS")
            events.append(StreamTaskMessageDone(index=index, parent_task_message=parent))
        self._text_slot = self._reasoning_slot = None
        if streamed:
            self._cut[payload.call_id] = streamed
        return events

    def _whole(self, content: MessageContent, superseded: int | None) -> StreamEvent:
        """A whole message part in a fresh slot, naming the cut message it supersedes."""
        if superseded is None:
            return self._full(content)
        parent = self._task_message(superseded, content, "DONE")
        index = self._claim()
        return StreamTaskMessageFull(content=content, index=index, parent_task_message=parent)

    @staticmethod
    def _reasoning(text: str, *, summary: bool) -> ReasoningContent:
        """A cut reasoning message as it stood: its summary, or its reasoning."""
        if summary:
            return ReasoningContent(author="agent", summary=[text], content=[])
        return ReasoningContent(author="agent", summary=[], content=[text])

    def _task_message(
        self, index: int, content: MessageContent, status: Literal["IN_PROGRESS", "DONE"]
    ) -> TaskMessage:
        """The message first streamed in slot ``index`` as agentex names a stored one: the
        same ``id`` on the cut message's Done and on the answer that supersedes it."""
        conversation = self._record.conversation_id if self._record is not None else ""
        return TaskMessage(
            content=content,
            task_id=conversation,
            id=message_id(conversation, index),
            streaming_status=status,
        )

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

    def _input_requested(self, payload: InputRequested) -> list[StreamEvent]:
        """A question for a person (its prompt, the answer's schema): the run waits for it."""
        return [self._data("agent", "input_requested", payload)]

    def _input_answered(self, payload: InputAnswered) -> list[StreamEvent]:
        return [self._data("user", "input_answered", payload)]

    def _budget_requested(self, payload: BudgetRequested) -> list[StreamEvent]:
        """The run's budget ran out under the ``park`` policy: it waits for a person to
        extend it (what it spent against which limit)."""
        return [self._data("agent", "budget_requested", payload)]

    def _budget_decided(self, payload: BudgetDecided) -> list[StreamEvent]:
        return [self._data("user", "budget_decided", payload)]

    def _version_changed(self, payload: VersionChanged) -> list[StreamEvent]:
        """The run goes on under another agent version (a deploy's upgrade, an operator's
        move): what changed, and where its recorded calls first differed."""
        return [self._data("agent", "version_changed", payload)]

    def _step(self, payload: StepRecorded) -> list[StreamEvent]:
        """A harness's streamed data (a ``STREAM_DATA`` note); any other step shows nothing."""
        if payload.name != STREAM_DATA or not isinstance(payload.value, dict):
            return []
        return [self._full(DataContent(author="agent", data=payload.value))]

    def _settled(self, payload: SubmissionSettled) -> StreamEvent:
        """How a submission ended (its status, and error and code unless it succeeded), so a
        reader shows an abort, a failure or a timeout the same live and read back later. Its
        result is left out: the answer came as a message already."""
        data: dict[str, JsonValue] = {"kind": "submission_settled"}
        if self._record is not None and self._record.submission_id is not None:
            data["submissionId"] = self._record.submission_id
        data.update(payload.to_json_object())
        data.pop("result", None)
        return self._full(DataContent(author="agent", data=data))

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
    InputRequested: StreamProjector._input_requested,
    InputAnswered: StreamProjector._input_answered,
    TaskSpawned: StreamProjector._task_spawned,
    TaskFinished: StreamProjector._task_finished,
    LogTruncated: StreamProjector._log_truncated,
    VersionChanged: StreamProjector._version_changed,
    BudgetRequested: StreamProjector._budget_requested,
    BudgetDecided: StreamProjector._budget_decided,
    StepRecorded: StreamProjector._step,
}


def project(records: Iterable[Record]) -> Iterator[StreamEvent]:
    """The canonical stream of a log (or of any seq-ordered run of it from seq 1).

    Example::

        events = list(project(await store.read(conversation_id)))
    """
    projector = StreamProjector()
    for record in records:
        yield from projector.feed(record)
