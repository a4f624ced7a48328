"""The canonical stream in the Vercel AI SDK's UI message stream protocol (``?view=ai-sdk``):
what ``useChat`` reads. Parts are written as the protocol's JSON, checked in the tests
against the ``ai`` npm package's own schema and reader."""

from __future__ import annotations

from pydantic import JsonValue

from tether.records import SettlementStatus, SubmissionSettled
from tether.stream._runs import RunProjector, WireEvent, json_text
from tether.stream._types import MessageContent, ToolRequestContent, ToolResponseContent

__all__ = ("AiSdkProjector",)


class AiSdkProjector(RunProjector):
    """Records → UI message stream parts. Each submission is one assistant message
    (``start`` with its submission id as ``messageId`` ... ``finish``), each model call in
    it a step (``start-step`` / ``finish-step``): text as ``text-start/-delta/-end``,
    reasoning as ``reasoning-*``, tool calls as ``tool-input-start/-delta/-available`` and
    ``tool-output-available`` (or ``tool-output-error``), all ``dynamic``; an approval also
    as ``tool-approval-request``; the rest (approvals, inputs, budgets, subagents, signals,
    a harness's data, and the users' messages in a session's stream) as ``data-<kind>``
    parts (``data-approval-requested``...). A failure is an ``error`` part then ``finish``
    with ``finishReason: "error"``; an abort an ``abort`` part then ``finish``.

    Example::

        projector = AiSdkProjector()
        for record in await store.read(conversation_id):
            for part in projector.feed(record):
                print(part["type"])
    """

    def __init__(
        self, *, submission: str | None = None, users: bool = True, since: int = 0
    ) -> None:
        super().__init__(submission=submission, users=users, since=since)
        self._calls: set[str] = set()  # the tool calls of the message, by id
        self._step = False
        self._answered = False  # a tool output came since the step began
        self._user: set[str] = set()  # message ids of users' messages

    def observe(self, content: MessageContent) -> None:
        if isinstance(content, ToolRequestContent):
            self._calls.add(content.tool_call_id)  # in the message the client has

    def _in_step(self) -> list[WireEvent]:
        """A model's output goes in a step: a new one after the tools' outputs."""
        if self._step and not self._answered:
            return []
        events: list[WireEvent] = [{"type": "finish-step"}] if self._step else []
        self._step, self._answered = True, False
        return [*events, {"type": "start-step"}]

    def run_started(self) -> list[WireEvent]:
        self._step = self._answered = False
        return [{"type": "start", "messageId": self.run}]

    def run_ended(self, settled: SubmissionSettled) -> list[WireEvent]:
        events: list[WireEvent] = [{"type": "finish-step"}] if self._step else []
        self._step = False
        self._calls.clear()
        if settled.status == SettlementStatus.FAILED:
            code = f"{settled.error_code}: " if settled.error_code else ""
            error = {"type": "error", "errorText": f"{code}{settled.error or 'failed'}"}
            return [*events, error, {"type": "finish", "finishReason": "error"}]
        if settled.status == SettlementStatus.ABORTED:
            abort: WireEvent = {"type": "abort"}
            if settled.error:
                abort["reason"] = settled.error
            return [*events, abort, {"type": "finish", "finishReason": "other"}]
        return [*events, {"type": "finish", "finishReason": "stop"}]

    def text_start(self, mid: str, author: str) -> list[WireEvent]:
        if author == "user":
            self._user.add(mid)
            return []
        return [*self._in_step(), {"type": "text-start", "id": mid}]

    def text_delta(self, mid: str, text: str) -> list[WireEvent]:
        if mid in self._user:
            return [{"type": "data-user-message", "id": mid, "data": {"text": text}}]
        return [{"type": "text-delta", "id": mid, "delta": text}]

    def text_end(self, mid: str) -> list[WireEvent]:
        if mid in self._user:
            self._user.discard(mid)
            return []
        return [{"type": "text-end", "id": mid}]

    def reasoning_start(self, mid: str) -> list[WireEvent]:
        return [*self._in_step(), {"type": "reasoning-start", "id": mid}]

    def reasoning_delta(self, mid: str, text: str) -> list[WireEvent]:
        return [{"type": "reasoning-delta", "id": mid, "delta": text}]

    def reasoning_end(self, mid: str) -> list[WireEvent]:
        return [{"type": "reasoning-end", "id": mid}]

    def tool_call(self, request: ToolRequestContent) -> list[WireEvent]:
        call, name = request.tool_call_id, request.name
        self._calls.add(call)
        return [
            *self._in_step(),
            {"type": "tool-input-start", "toolCallId": call, "toolName": name, "dynamic": True},
            {
                "type": "tool-input-delta",
                "toolCallId": call,
                "inputTextDelta": json_text(request.arguments),
            },
            {
                "type": "tool-input-available",
                "toolCallId": call,
                "toolName": name,
                "input": request.arguments,
                "dynamic": True,
            },
        ]

    def tool_result(self, mid: str, response: ToolResponseContent) -> list[WireEvent]:
        call = response.tool_call_id
        if call not in self._calls:  # asked before this stream's message began
            data: dict[str, JsonValue] = {"toolCallId": call, "output": response.content}
            return [{"type": "data-tool-output", "id": mid, "data": data}]
        self._answered = True
        if response.is_error:
            text = json_text(response.content)
            return [{"type": "tool-output-error", "toolCallId": call, "errorText": text,
                     "dynamic": True}]  # fmt: skip
        return [
            {
                "type": "tool-output-available",
                "toolCallId": call,
                "output": response.content,
                "dynamic": True,
            }
        ]

    def data(self, mid: str, kind: str, data: dict[str, JsonValue]) -> list[WireEvent]:
        events: list[WireEvent] = [
            {"type": "data-" + kind.replace("_", "-"), "id": mid, "data": data}
        ]
        call, approval = data.get("callId"), data.get("approvalId")
        if kind == "approval_requested" and call in self._calls and isinstance(approval, str):
            events.append(
                {"type": "tool-approval-request", "approvalId": approval, "toolCallId": call}
            )
        return events
