"""The demo's keyless model: it echoes, and calls the demo tools when a message asks for them."""

from __future__ import annotations

import asyncio
import json
import re

from pydantic import JsonValue

from tether.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from tether.models._protocol import DeltaSink, StreamDelta
from tether.models._scripted import estimate_tokens

__all__ = ("EchoModel",)

_EMAIL = re.compile(r"^\s*email\s+([^:]+?)\s*:\s*(.+)$", re.IGNORECASE | re.DOTALL)
_RESEARCH = re.compile(r"^\s*research\s+(.+)$", re.IGNORECASE | re.DOTALL)


class EchoModel:
    """Deterministic, offline, streaming. ``chunk`` sets the size of streamed pieces.

    - text mentioning ``time`` calls the ``clock`` tool (if offered);
    - ``research <topic>`` calls ``research``; ``email <to>: <text>`` calls ``send_email``;
    - with ``settings["resultSchema"]`` it answers JSON that fits a simple object schema;
    - anything else: ``You said: <text>``. After tool results it reports them, and a user's
      message after them as a steer (unless every result was an error: a run cut short).
    """

    def __init__(self, *, chunk: int = 4, delay: float = 0.0) -> None:
        self.chunk = chunk
        self.delay = delay

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        last = request.messages[-1] if request.messages else Message.user("")
        tools = {tool.name for tool in request.tools}
        if _answering_tools(request.messages):
            message = Message.assistant(self._after_tools(request))
        else:
            message = self._answer(last.text, tools, request)
        return await self.respond(request, message, stream)

    async def respond(
        self, request: ModelRequest, message: Message, stream: DeltaSink | None = None
    ) -> ModelResponse:
        """``message`` as this model answers ``request``: its text streamed in chunks, its
        usage estimated from the prompt and the answer (for a model built on this one)."""
        text = message.text
        if stream is not None:
            for start in range(0, len(text), self.chunk):
                if self.delay:
                    await asyncio.sleep(self.delay)
                await stream(StreamDelta("text", text[start : start + self.chunk]))
        prompt = " ".join(m.text for m in request.messages)
        usage = Usage(input_tokens=estimate_tokens(prompt), output_tokens=estimate_tokens(text))
        return ModelResponse(
            message=message,
            usage=usage,
            finish_reason="tool_calls" if message.tool_calls else "stop",
        )

    def _answer(self, text: str, tools: set[str], request: ModelRequest) -> Message:
        call_id = f"call-{len(request.messages)}"
        if (email := _EMAIL.match(text)) and "send_email" in tools:
            args: dict[str, JsonValue] = {
                "to": email.group(1).strip(),
                "text": email.group(2).strip(),
            }
            return _tool_call(call_id, "send_email", args)
        if (research := _RESEARCH.match(text)) and "research" in tools:
            return _tool_call(call_id, "research", {"topic": research.group(1).strip()})
        if "time" in text.lower() and "clock" in tools:
            return _tool_call(call_id, "clock", {})
        schema = request.settings.get("resultSchema")
        if isinstance(schema, dict):
            return Message.assistant(json.dumps(_fitting(schema)))
        return Message.assistant(f"You said: {text}")

    @staticmethod
    def _after_tools(request: ModelRequest) -> str:
        results: list[tuple[str, ToolResultPart]] = []
        names: dict[str, str] = {}
        steers: list[str] = []
        for message in request.messages:
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    names[part.call_id] = part.name
                elif isinstance(part, ToolResultPart):
                    results.append((names.get(part.call_id, part.name or "tool"), part))
            if message.role == "assistant" and message.tool_calls:
                results, steers = [], []  # only the latest batch, and what came after it
            elif message.role == "user" and results:
                steers.append(message.text)
        lines = []
        for name, result in results:
            if name == "clock":
                lines.append(f"It is {result.content}.")
            elif name == "send_email":
                lines.append(
                    f"I did not send the email: {result.content}"
                    if result.is_error
                    else f"Email sent: {result.content}"
                )
            elif name == "research":
                lines.append(f"Here is what I found: {result.content}")
            else:
                lines.append(f"{name} returned: {result.content}")
        if steers:
            lines.append("You also told me: " + " / ".join(steers) + ".")
        return " ".join(lines)


def _answering_tools(messages: tuple[Message, ...]) -> bool:
    """Whether the model's last move was a tool batch whose results (and maybe steers) followed.

    A user's message after a batch of which no call went through (its run was cut short: an
    abort, a timeout) is a new message to answer, not a steer into a batch it reports."""
    asked_since = went_through = False
    for message in reversed(messages):
        if message.role == "assistant":
            return bool(message.tool_calls) and (went_through or not asked_since)
        if message.role == "user":
            asked_since = True
        elif message.role == "tool":
            went_through |= any(
                isinstance(part, ToolResultPart) and not part.is_error for part in message.parts
            )
        else:
            return False
    return False


def _tool_call(call_id: str, name: str, args: dict[str, JsonValue]) -> Message:
    return Message(role="assistant", parts=(ToolCallPart(call_id=call_id, name=name, args=args),))


def _fitting(schema: dict[str, JsonValue]) -> JsonValue:
    """A value that fits a simple JSON Schema (objects of strings, numbers and booleans)."""
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties")
        fields = properties if isinstance(properties, dict) else {}
        return {
            name: _fitting(sub if isinstance(sub, dict) else {}) for name, sub in fields.items()
        }
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]  # type: ignore[index]
    return "example"
