"""The canonical stream in the AG-UI event protocol (``?view=ag-ui``): what CopilotKit and
AG-UI's ``HttpAgent`` read. Events are written as the protocol's JSON (camelCase, absent
fields left out), checked in the tests against the ``ag-ui-protocol`` package's models; the
server does not need that package."""

from __future__ import annotations

from pydantic import JsonValue

from tether.records import SettlementStatus, SubmissionSettled
from tether.stream._runs import RunProjector, WireEvent, json_text
from tether.stream._types import (
    DataContent,
    MessageContent,
    ToolRequestContent,
    ToolResponseContent,
)

__all__ = ("AgUiProjector",)

# What a parked run waits for, by the data kind that asked: the interrupt's reason.
_WAITS = {
    "approval_requested": ("approval", "approvalId"),
    "input_requested": ("input", "inputId"),
    "budget_requested": ("budget", "gateId"),
}
# What answers one, by the data kind: the field naming the wait it answers.
_ANSWERS = {
    "approval_decided": "approvalId",
    "input_answered": "inputId",
    "budget_decided": "gateId",
}


class AgUiProjector(RunProjector):
    """Records → AG-UI events. Each submission is a run (``runId`` its submission id,
    ``threadId`` the session): ``RUN_STARTED``, its messages as ``TEXT_MESSAGE_*``,
    reasoning as ``REASONING_*``, tool calls as ``TOOL_CALL_START/ARGS/END`` and
    ``TOOL_CALL_RESULT``, the rest (approvals, inputs, budgets, signals, subagents, a
    harness's data) as ``CUSTOM`` events named by their kind, then ``RUN_FINISHED`` (a
    success, or ``outcome: cancelled`` for an abort) or ``RUN_ERROR`` (a failure, with its
    code: ``budget_exhausted``, ``timeout``...).

    Example::

        projector = AgUiProjector()
        for record in await store.read(conversation_id):
            for event in projector.feed(record):
                print(event["type"])
    """

    def __init__(
        self, *, submission: str | None = None, users: bool = True, since: int = 0
    ) -> None:
        super().__init__(submission=submission, users=users, since=since)
        self._reply: str | None = None  # the assistant message the next tool calls belong to
        self._waiting: dict[str, WireEvent] = {}  # open interrupts, by the id they answer to

    def run_started(self) -> list[WireEvent]:
        return [{"type": "RUN_STARTED", "threadId": self.thread, "runId": self.run}]

    def run_ended(self, settled: SubmissionSettled) -> list[WireEvent]:
        self._waiting.clear()
        if settled.status == SettlementStatus.FAILED:
            event: WireEvent = {"type": "RUN_ERROR", "message": settled.error or "failed"}
            if settled.error_code:
                event["code"] = settled.error_code
            return [event]
        end: WireEvent = {"type": "RUN_FINISHED", "threadId": self.thread, "runId": self.run}
        if settled.status == SettlementStatus.ABORTED:
            end["outcome"] = {"type": "cancelled"}
        elif settled.result is not None:
            end["result"] = settled.result
        return [end]

    def close(self) -> list[WireEvent]:
        """A run parked for a person ends the reply as interrupted, naming what it waits
        for; the answer goes to Tether's approval, input or budget route."""
        if self.run is None or not self._waiting:
            return []
        interrupts = list(self._waiting.values())
        end: WireEvent = {"type": "RUN_FINISHED", "threadId": self.thread, "runId": self.run}
        end["outcome"] = {"type": "interrupt", "interrupts": interrupts}
        self.run = None
        return [end]

    def text_start(self, mid: str, author: str) -> list[WireEvent]:
        role = "user" if author == "user" else "assistant"
        if role == "assistant":
            self._reply = mid
        return [{"type": "TEXT_MESSAGE_START", "messageId": mid, "role": role}]

    def text_delta(self, mid: str, text: str) -> list[WireEvent]:
        return [{"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text}]

    def text_end(self, mid: str) -> list[WireEvent]:
        return [{"type": "TEXT_MESSAGE_END", "messageId": mid}]

    def reasoning_start(self, mid: str) -> list[WireEvent]:
        return [
            {"type": "REASONING_START", "messageId": f"{mid}:reasoning"},
            {"type": "REASONING_MESSAGE_START", "messageId": mid, "role": "reasoning"},
        ]

    def reasoning_delta(self, mid: str, text: str) -> list[WireEvent]:
        return [{"type": "REASONING_MESSAGE_CONTENT", "messageId": mid, "delta": text}]

    def reasoning_end(self, mid: str) -> list[WireEvent]:
        return [
            {"type": "REASONING_MESSAGE_END", "messageId": mid},
            {"type": "REASONING_END", "messageId": f"{mid}:reasoning"},
        ]

    def tool_call(self, request: ToolRequestContent) -> list[WireEvent]:
        start: WireEvent = {
            "type": "TOOL_CALL_START",
            "toolCallId": request.tool_call_id,
            "toolCallName": request.name,
        }
        if self._reply is not None:
            start["parentMessageId"] = self._reply
        arguments = json_text(request.arguments)
        return [
            start,
            {"type": "TOOL_CALL_ARGS", "toolCallId": request.tool_call_id, "delta": arguments},
            {"type": "TOOL_CALL_END", "toolCallId": request.tool_call_id},
        ]

    def tool_result(self, mid: str, response: ToolResponseContent) -> list[WireEvent]:
        self._reply = None  # the model's next words are a new message
        return [
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": mid,
                "toolCallId": response.tool_call_id,
                "content": json_text(response.content),
                "role": "tool",
            }
        ]

    def observe(self, content: MessageContent) -> None:
        if isinstance(content, DataContent) and isinstance(kind := content.data.get("kind"), str):
            self._track(kind, content.data)

    def data(self, mid: str, kind: str, data: dict[str, JsonValue]) -> list[WireEvent]:
        self._track(kind, data)
        return [{"type": "CUSTOM", "name": kind, "value": data}]

    def _track(self, kind: str, data: dict[str, JsonValue]) -> None:
        """Keeps the interrupts a run parked on open until they are answered."""
        if kind in _ANSWERS:
            answered = data.get(_ANSWERS[kind])
            if isinstance(answered, str):
                self._waiting.pop(answered, None)
            return
        if kind not in _WAITS:
            return
        reason, key = _WAITS[kind]
        wait = data.get(key)
        if not isinstance(wait, str):
            return
        interrupt: WireEvent = {"id": wait, "reason": reason}
        if isinstance(call := data.get("callId"), str):
            interrupt["toolCallId"] = call
        if isinstance(prompt := data.get("prompt") or data.get("reason"), str):
            interrupt["message"] = prompt
        if isinstance(schema := data.get("answerSchema"), dict):
            interrupt["responseSchema"] = schema
        self._waiting[wait] = interrupt
