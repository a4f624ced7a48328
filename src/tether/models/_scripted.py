"""A deterministic, keyless model driven by a script: for tests, examples and demos."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tether._wire import JsonObject
from tether.errors import ContextOverflow, ModelFatalError, ModelTransientError
from tether.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from tether.models._protocol import DeltaSink, StreamDelta

__all__ = (
    "Delay",
    "Failure",
    "Reply",
    "Rule",
    "ScriptedModel",
    "Text",
    "Thinking",
    "ToolUse",
    "estimate_tokens",
)


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Thinking:
    text: str
    signature: str | None = None
    opaque: str | None = None


@dataclass(frozen=True, slots=True)
class ToolUse:
    name: str
    args: JsonObject = field(default_factory=dict)
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    """Raise a provider error: ``transient`` (retry later), ``fatal``, or ``overflow``."""

    kind: Literal["transient", "fatal", "overflow"]
    message: str = "scripted failure"


@dataclass(frozen=True, slots=True)
class Delay:
    seconds: float


Step = Text | Thinking | ToolUse | Failure | Delay
Reply = ModelResponse | str | BaseException | Step | Sequence[Step]


@dataclass(frozen=True, slots=True)
class Rule:
    """``reply`` when ``match`` fits: a substring or regex of the last user text (``on="user"``)
    or of the last tool result (``on="tool"``), or a predicate over the whole request."""

    match: str | re.Pattern[str] | Callable[[ModelRequest], bool]
    reply: object
    """A reply, or a function of the request returning one."""
    on: Literal["user", "tool", "any"] = "user"

    def fits(self, request: ModelRequest) -> bool:
        if callable(self.match) and not isinstance(self.match, re.Pattern):
            return self.match(request)
        last = request.messages[-1] if request.messages else None
        if last is None or (self.on == "user" and last.role != "user"):
            return False
        if self.on == "tool" and last.role != "tool":
            return False
        text = _plain(last)
        if isinstance(self.match, re.Pattern):
            return self.match.search(text) is not None
        return self.match in text


def _steps(reply: object) -> list[Step]:
    if isinstance(reply, str):
        return [Text(reply)]
    if isinstance(reply, Text | Thinking | ToolUse | Failure | Delay):
        return [reply]
    steps = (Text, Thinking, ToolUse, Failure, Delay)
    if isinstance(reply, Sequence) and all(isinstance(step, steps) for step in reply):
        return list(reply)
    raise TypeError(
        f"a scripted reply is a string, a ModelResponse, an exception or steps: {reply!r}"
    )


def _plain(message: Message) -> str:
    return " ".join(
        part.content if isinstance(part, ToolResultPart) else getattr(part, "text", "")
        for part in message.parts
    )


def estimate_tokens(text: str) -> int:
    """A deterministic stand-in for a tokenizer: about four characters a token."""
    return (len(text) + 3) // 4


Script = Sequence[object] | Callable[[ModelRequest], object]
"""Replies (or :class:`Rule` objects), or a function of the request returning a reply."""


class ScriptedModel:
    """Answers from a script, deterministically and offline.

    The script is a list of replies taken in order, a list of :class:`Rule` (the first
    that fits the request answers; ``default`` otherwise), or a function of the request.
    A reply is a string, a :class:`ModelResponse`, an exception to raise, or steps:
    :class:`Text`, :class:`Thinking`, :class:`ToolUse`, :class:`Failure`, :class:`Delay`.
    ``chunk`` streams text in pieces of that many characters, ``delay`` seconds apart (a
    reader can watch it stream, or steer it). ``calls`` lists the requests
    (``record=False``: none are kept; ``invocations`` still counts them).

    Example::

        model = ScriptedModel([
            Rule("time", ToolUse("clock")),
            Rule("", "It is {tool}", on="tool"),
        ], default="I can only tell the time.")
    """

    def __init__(
        self,
        script: Script,
        *,
        chunk: int | None = None,
        default: Reply | None = None,
        record: bool = True,
        delay: float = 0.0,
    ) -> None:
        self._script = script
        self._chunk = chunk
        self._delay = delay
        self._default = default
        self._record = record
        self._invocations = 0
        self.calls: list[ModelRequest] = []
        """Every request, unless ``record=False`` (a long-running server's keyless model
        keeps none: they would pile up)."""

    @property
    def invocations(self) -> int:
        return self._invocations

    def _reply(self, request: ModelRequest) -> object:
        script = self._script
        if callable(script):
            return script(request)
        if script and all(isinstance(item, Rule) for item in script):
            for rule in script:
                assert isinstance(rule, Rule)
                if rule.fits(request):
                    return rule.reply(request) if callable(rule.reply) else rule.reply
            if self._default is None:
                raise AssertionError(f"no rule fits {_plain(request.messages[-1])!r}")
            return self._default
        if self._invocations > len(script):
            raise AssertionError(
                f"the script has {len(script)} replies; this is call {self._invocations}"
            )
        return script[self._invocations - 1]

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        self._invocations += 1
        if self._record:
            self.calls.append(request)
        reply = self._reply(request)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ModelResponse):
            response = reply
        else:
            response = await self._perform(request, _steps(reply))
        if stream is not None and self._chunk:
            await self._stream(response, stream)
        return response

    async def _perform(self, request: ModelRequest, steps: Sequence[Step]) -> ModelResponse:
        parts: list[TextPart | ThinkingPart | ToolCallPart] = []
        for index, step in enumerate(steps):
            if isinstance(step, Delay):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Failure):
                error = {
                    "transient": ModelTransientError,
                    "fatal": ModelFatalError,
                    "overflow": ContextOverflow,
                }
                raise error[step.kind](step.message)
            elif isinstance(step, Text):
                parts.append(TextPart(text=step.text))
            elif isinstance(step, Thinking):
                parts.append(
                    ThinkingPart(text=step.text, signature=step.signature, opaque=step.opaque)
                )
            else:
                call_id = step.call_id or f"call-{len(request.messages)}-{index}"
                parts.append(ToolCallPart(call_id=call_id, name=step.name, args=step.args))
        message = Message(role="assistant", parts=tuple(parts))
        prompt = "".join(_plain(m) for m in request.messages)
        usage = Usage(
            input_tokens=estimate_tokens(prompt), output_tokens=estimate_tokens(_plain(message))
        )
        finish = "tool_calls" if message.tool_calls else "stop"
        return ModelResponse(message=message, usage=usage, finish_reason=finish)

    async def _stream(self, response: ModelResponse, stream: DeltaSink) -> None:
        assert self._chunk
        for part in response.message.parts:
            if isinstance(part, TextPart | ThinkingPart):
                kind: Literal["text", "thinking"] = (
                    "text" if isinstance(part, TextPart) else "thinking"
                )
                for start in range(0, len(part.text), self._chunk):
                    if self._delay and start:
                        await asyncio.sleep(self._delay)
                    await stream(StreamDelta(kind, part.text[start : start + self._chunk]))
