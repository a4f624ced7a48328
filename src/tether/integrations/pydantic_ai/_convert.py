"""pydantic-ai requests as neutral Tether requests, and Tether responses back as pydantic-ai's.

The neutral request is what the journal hashes (I0), so it holds only what the model is
shown: no timestamps, run ids or other values that change when a resumed run rebuilds it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, get_args

from pydantic import JsonValue
from pydantic_ai import messages as pa
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage
from pydantic_core import to_jsonable_python

from tether.messages import (
    DataPart,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    TextPart,
    ToolResultPart,
    ToolSpec,
)
from tether.models.pydantic_ai import from_pydantic_ai, to_pydantic_ai

__all__ = ("as_text", "jsonable", "neutral_request", "to_response")

_FINISH_REASONS = frozenset(get_args(pa.FinishReason))


def jsonable(value: Any) -> JsonValue:
    """A framework value as JSON (pydantic models, dataclasses, datetimes...)."""
    converted: JsonValue = to_jsonable_python(value, fallback=str)
    return converted


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(jsonable(value), sort_keys=True)


def _request_messages(request: pa.ModelRequest) -> list[Message]:
    messages: list[Message] = []
    if request.instructions:
        messages.append(Message.system(request.instructions))
    for part in request.parts:
        if isinstance(part, pa.SystemPromptPart):
            messages.append(Message.system(part.content))
        elif isinstance(part, pa.UserPromptPart):
            content = [part.content] if isinstance(part.content, str) else part.content
            parts: list[Part] = [
                TextPart(text=item) if isinstance(item, str) else DataPart(data=jsonable(item))
                for item in content
            ]
            messages.append(Message(role="user", parts=tuple(parts)))
        elif isinstance(part, pa.ToolReturnPart | pa.RetryPromptPart):
            failed = isinstance(part, pa.RetryPromptPart) or part.outcome != "success"
            result = ToolResultPart(
                call_id=part.tool_call_id,
                name=part.tool_name,
                content=part.model_response_str()
                if isinstance(part, pa.ToolReturnPart)
                else part.model_response(),
                is_error=failed,
            )
            messages.append(Message(role="tool", parts=(result,)))
        else:  # feedback and parts newer than this adapter: shown to the model, so hashed
            messages.append(Message(role="user", parts=(DataPart(data=jsonable(part)),)))
    return messages


def neutral_request(
    model_name: str,
    messages: Sequence[pa.ModelMessage],
    settings: ModelSettings | None,
    parameters: ModelRequestParameters,
) -> ModelRequest:
    """The request the journal records and hashes for one pydantic-ai model request."""
    neutral: list[Message] = []
    for message in messages:
        if isinstance(message, pa.ModelRequest):
            neutral += _request_messages(message)
        else:
            neutral.append(from_pydantic_ai(message).message)
    tools = [*parameters.function_tools, *parameters.output_tools]
    return ModelRequest(
        model=model_name,
        messages=tuple(neutral),
        tools=tuple(
            ToolSpec(
                name=tool.name,
                description=tool.description or "",
                parameters=tool.parameters_json_schema,
            )
            for tool in tools
        ),
        settings={
            "modelSettings": jsonable(dict(settings or {})),
            "outputMode": parameters.output_mode,
            "allowTextOutput": parameters.allow_text_output,
            "outputTools": [tool.name for tool in parameters.output_tools],
        },
    )


def to_response(response: ModelResponse, model_name: str) -> pa.ModelResponse:
    """A journaled completion as the pydantic-ai response the agent continues from."""
    (converted,) = to_pydantic_ai([response.message])
    assert isinstance(converted, pa.ModelResponse)
    usage = response.usage
    finish = response.finish_reason
    return pa.ModelResponse(
        parts=converted.parts,
        usage=RequestUsage(
            input_tokens=(usage.input_tokens or 0) if usage else 0,
            output_tokens=(usage.output_tokens or 0) if usage else 0,
            cache_read_tokens=(usage.cache_read_tokens or 0) if usage else 0,
            cache_write_tokens=(usage.cache_write_tokens or 0) if usage else 0,
        ),
        model_name=model_name,
        finish_reason=finish if finish in _FINISH_REASONS else None,  # type: ignore[arg-type]
    )
