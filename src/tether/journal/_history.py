"""The transcript: a log's active path projected to chat messages."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tether.errors import InvalidExecutionLog
from tether.journal._unread import is_gap
from tether.messages import DataPart, FilePart, Message, TextPart, ToolResultPart
from tether.records import (
    AssistantMessageCompleted,
    Compaction,
    LogTruncated,
    Payload,
    Record,
    Signal,
    SteerReceived,
    ToolOutcome,
    UserMessage,
)
from tether.tree import Reducer

__all__ = (
    "SIGNAL_MEDIA_TYPE",
    "PrefixTranscripts",
    "Transcript",
    "messages_of",
    "projected",
    "transcript",
)

SIGNAL_MEDIA_TYPE = "application/vnd.tether.signal+json"
"""The media type of the data part by which a transcript carries a signal (its payload, as
JSON): what tells a harness a signal from what a user wrote."""
_MESSAGE_KINDS = frozenset(
    kind.KIND
    for kind in (
        UserMessage,
        Signal,
        SteerReceived,
        AssistantMessageCompleted,
        ToolOutcome,
        Compaction,
    )
)


def messages_of(records: Iterable[Record]) -> list[Message]:
    """The chat messages that records stand for (most records stand for none).

    Each record is projected once and keeps its messages, so the transcript and a turn's
    inputs hand a harness the very same objects for the same record."""
    messages: list[Message] = []
    for record in records:
        if record.kind not in _MESSAGE_KINDS:  # skip decoding deltas and lifecycle records
            continue
        projected = record._messages
        if projected is None:
            projected = record._messages = _project(record.payload)
        messages.extend(projected)
    return messages


def projected(payloads: Iterable[Payload]) -> dict[int, tuple[Message, ...]]:
    """The chat messages that payloads not yet appended stand for, by ``id`` of the payload:
    once appended, their records are given the very same objects (see :func:`messages_of`)."""
    return {id(payload): _project(payload) for payload in payloads}


def _project(payload: Payload) -> tuple[Message, ...]:
    if isinstance(payload, UserMessage):
        files = tuple(
            FilePart(digest=ref.digest, media_type=ref.media_type, size=ref.size)
            for ref in payload.attachments or ()
        )
        return (Message(role="user", parts=(TextPart(text=payload.body), *files)),)
    if isinstance(payload, Signal):
        data = payload.to_json_object()
        return (Message(role="user", parts=(DataPart(data=data, media_type=SIGNAL_MEDIA_TYPE),)),)
    if isinstance(payload, SteerReceived):
        return (Message.user(payload.body),)
    if isinstance(payload, AssistantMessageCompleted):
        return () if payload.interrupted or payload.purpose else (payload.message,)
    if isinstance(payload, ToolOutcome):
        part = ToolResultPart(
            call_id=payload.call_id,
            content=payload.content,
            data=payload.data,
            is_error=payload.is_error,
        )
        return (Message(role="tool", parts=(part,)),)
    if isinstance(payload, Compaction):
        return (Message.user(f"Summary of the conversation so far:\n{payload.summary}"),)
    return ()


class Transcript:
    """The active path's messages, kept up to date as records arrive (O(1) per record but
    for compactions, which rebuild the path).

    A tool's result is shown only where a provider takes it: answering a call that the last
    assistant message on the path asked for and nothing answered yet. So a harness's own call
    (a question ``Turn.ask`` puts to a person, a call the model never made) or a result whose
    call a compaction summarized away stays in the log, and out of what a model is sent:
    every provider refuses a tool result that answers no call it just made. One exception: a
    call of the harness's own made for a call of the model's, named ``<call id>:<what>`` (the
    gate pydantic-ai's integration puts before a deferred call, ``<call id>:approval``), is
    shown after it, for the harness to fold into that call's result before a model sees it."""

    def __init__(self) -> None:
        self._reducer = Reducer()
        self._by_seq: dict[int, list[Message]] = {}
        """What each record on the path stands for."""
        self._shown: dict[int, list[Message]] = {}
        """What of it the transcript shows, given what precedes it on the path."""
        self._messages: list[Message] = []
        self._called: frozenset[str] = frozenset()
        """The calls of the last assistant message on the path."""
        self._asked: set[str] = set()
        """Those of them still without a result."""

    def add(self, record: Record) -> None:
        if record.kind == LogTruncated.KIND:
            self._resume(record)
            return
        if is_gap(record):  # removed by retention: the log_truncated after it carries it
            return
        rebuilt = self._reducer.add(record)
        messages = messages_of((record,))
        if messages:
            self._by_seq[record.seq] = messages
        if rebuilt:
            self._show_path()
            return
        shown = self._admit(messages)
        if shown:
            self._shown[record.seq] = shown
            self._messages.extend(shown)

    def _admit(self, messages: Sequence[Message]) -> list[Message]:
        """Of ``messages``, coming next on the path, those a provider takes there."""
        shown: list[Message] = []
        for message in messages:
            if message.role == "assistant":
                self._called = frozenset(part.call_id for part in message.tool_calls)
                self._asked = set(self._called)
            elif message.role == "tool":
                kept = [
                    part
                    for part in message.parts
                    if isinstance(part, ToolResultPart) and self._answers(part.call_id)
                ]
                if len(kept) != len(message.parts):  # it answers a call nobody asked
                    if not kept:
                        continue
                    message = message.model_copy(update={"parts": tuple(kept)})
                self._asked.difference_update(part.call_id for part in kept)
            shown.append(message)
        return shown

    def _answers(self, call_id: str) -> bool:
        return call_id in self._asked or call_id.rpartition(":")[0] in self._called

    def _show_path(self) -> None:
        self._called = frozenset()
        self._asked = set()
        self._shown = {}
        self._messages = []
        for seq in self._reducer.active_path:
            shown = self._admit(self._by_seq.get(seq, ()))
            if shown:
                self._shown[seq] = shown
                self._messages.extend(shown)

    def _resume(self, anchor: Record) -> None:
        """Go on from the transcript a ``log_truncated`` record carries, as it stood at the
        last record it replaced: what reading the removed records would have left."""
        payload = anchor.payload
        assert isinstance(payload, LogTruncated)
        try:
            restored = Transcript.restored(
                payload.path, payload.parents, payload.groups, list(payload.messages)
            )
        except ValueError as exc:
            raise InvalidExecutionLog(f"seq {anchor.seq}: log_truncated {exc}") from None
        # An anchor an older Tether wrote may carry a result that answers no call: shown
        # as the records it stands for would be now.
        restored._show_path()
        self._reducer, self._by_seq, self._shown = (
            restored._reducer,
            restored._by_seq,
            restored._shown,
        )
        self._messages, self._called, self._asked = (
            restored._messages,
            restored._called,
            restored._asked,
        )

    def messages(self) -> list[Message]:
        """A copy of the current transcript."""
        return list(self._messages)

    def message_seqs(self) -> list[int]:
        """The seq of the record behind each message of the transcript, in order."""
        return [seq for seq in self._reducer.active_path for _ in self._shown.get(seq, ())]

    def export(self) -> tuple[list[int], list[int | None], list[tuple[int, int]]]:
        """What a snapshot keeps besides the messages themselves: the active path, its nodes'
        parents, and (seq, message count) of each record on it whose messages it shows."""
        path = self._reducer.active_path
        parents = self._reducer.parents
        groups = [(seq, len(self._shown[seq])) for seq in path if seq in self._shown]
        return list(path), [parents[seq] for seq in path], groups

    @classmethod
    def restored(
        cls,
        path: Sequence[int],
        parents: Sequence[int | None],
        groups: Sequence[tuple[int, int]],
        messages: list[Message],
    ) -> Transcript:
        """The transcript :meth:`export` described; ``ValueError`` if the parts disagree."""
        restored = cls()
        restored._reducer.resume_path(path, parents)
        on_path = set(path)
        start = 0
        for seq, count in groups:
            if seq not in on_path or count < 1:
                raise ValueError(f"snapshot group {seq} is not a message record on the path")
            restored._by_seq[seq] = restored._shown[seq] = messages[start : start + count]
            start += count
        if start != len(messages):
            raise ValueError("snapshot message counts do not add up")
        restored._messages = messages
        restored._called, restored._asked = _last_calls(messages)
        return restored


def _last_calls(messages: Sequence[Message]) -> tuple[frozenset[str], set[str]]:
    """The calls of the last assistant message, and those no later message answers."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == "assistant":
            called = frozenset(part.call_id for part in message.tool_calls)
            return called, set(called - answered)
        if message.role == "tool":
            answered.update(p.call_id for p in message.parts if isinstance(p, ToolResultPart))
    return frozenset(), set()


class PrefixTranscripts:
    """The transcripts of ever longer prefixes of one log, for a pass that walks it in order
    (a replay): each record is transcribed once, however many prefixes are asked for."""

    def __init__(self, records: Sequence[Record]) -> None:
        self._records = records
        self._transcript = Transcript()
        self._fed = 0

    def before(self, index: int) -> list[Message]:
        """The transcript of ``records[:index]``."""
        if index < self._fed:  # behind the walk (asked for late): transcribe it afresh
            return transcript(self._records[:index])
        for record in self._records[self._fed : index]:
            self._transcript.add(record)
        self._fed = index
        return self._transcript.messages()


def transcript(records: Sequence[Record]) -> list[Message]:
    """The reduced active path of a log as messages (what a model should see next)."""
    view = Transcript()
    for record in records:
        view.add(record)
    return view.messages()
