"""Test helpers around the scripted model (:class:`tether.models.ScriptedModel`)."""

from __future__ import annotations

from tether._wire import JsonObject
from tether.messages import Message, ModelResponse, TextPart, ToolCallPart
from tether.models import ScriptedModel

__all__ = ("CountingModel", "tool_call_response")


def tool_call_response(*calls: tuple[str, str, JsonObject], text: str = "") -> ModelResponse:
    """A response asking for tools: ``(call_id, name, args)`` each."""
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(call_id=cid, name=name, args=args) for cid, name, args in calls]
    return ModelResponse(
        message=Message(role="assistant", parts=tuple(parts)), finish_reason="tool_calls"
    )


class CountingModel(ScriptedModel):
    """Deliberately nondeterministic: answers ``resp#N`` for its N-th call, so a replay that
    secretly calls the model returns something different."""

    def __init__(self) -> None:
        super().__init__(lambda request: f"resp#{len(self.calls)}")
