"""Deterministic, offline models for tests and examples."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tether._wire import JsonObject
from tether.messages import Message, ModelRequest, ModelResponse, TextPart, ToolCallPart, Usage
from tether.models import DeltaSink, StreamDelta

__all__ = ("CountingModel", "ScriptedModel", "tool_call_response")

Reply = ModelResponse | str | BaseException
Script = Sequence[Reply] | Callable[[ModelRequest], Reply]


def _as_response(reply: ModelResponse | str) -> ModelResponse:
    if isinstance(reply, str):
        return ModelResponse(
            message=Message.assistant(reply), usage=Usage(input_tokens=1, output_tokens=1)
        )
    return reply


def tool_call_response(*calls: tuple[str, str, JsonObject], text: str = "") -> ModelResponse:
    """A response asking for tools: ``(call_id, name, args)`` each."""
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(call_id=cid, name=name, args=args) for cid, name, args in calls]
    return ModelResponse(
        message=Message(role="assistant", parts=tuple(parts)), finish_reason="tool_calls"
    )


class ScriptedModel:
    """Answers from a script: a list of replies in order, or a function of the request.

    A reply is a :class:`ModelResponse`, a plain string (an assistant text message), or an
    exception to raise. ``chunk`` streams text replies in pieces of that many characters.
    ``calls`` lists every request it received.

    Example::

        model = ScriptedModel(["hello", RuntimeError("provider down"), "again"])
    """

    def __init__(self, script: Script, *, chunk: int | None = None) -> None:
        self._script = script
        self._chunk = chunk
        self.calls: list[ModelRequest] = []

    @property
    def invocations(self) -> int:
        return len(self.calls)

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        self.calls.append(request)
        if callable(self._script):
            reply = self._script(request)
        else:
            if len(self.calls) > len(self._script):
                raise AssertionError(
                    f"the script has {len(self._script)} replies; call {len(self.calls)}"
                )
            reply = self._script[len(self.calls) - 1]
        if isinstance(reply, BaseException):
            raise reply
        response = _as_response(reply)
        if stream is not None and self._chunk:
            for part in response.message.parts:
                if isinstance(part, TextPart):
                    for start in range(0, len(part.text), self._chunk):
                        await stream(StreamDelta("text", part.text[start : start + self._chunk]))
        return response


class CountingModel(ScriptedModel):
    """Deliberately nondeterministic: answers ``resp#N`` for its N-th call, so a replay that
    secretly calls the model returns something different."""

    def __init__(self) -> None:
        super().__init__(lambda request: f"resp#{len(self.calls)}")
