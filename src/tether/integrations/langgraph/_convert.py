"""LangChain messages to Tether's neutral messages and back.

The neutral form is what the journal hashes (I0) and records, so it must not depend on
anything that changes between a run and its resume: message ids (LangGraph assigns random
ones), timestamps and provider metadata are left out. Reasoning blocks keep their original
JSON in ``ThinkingPart.opaque`` so they go back to the model byte for byte.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import InputTokenDetails, OutputTokenDetails, UsageMetadata
from langchain_core.messages.tool import ToolCall as LCToolCall
from pydantic import JsonValue

from tether.messages import (
    DataPart,
    FilePart,
    Message,
    ModelResponse,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResult,
    ToolResultPart,
    Usage,
)

__all__ = (
    "BLOCK_MEDIA_TYPE",
    "from_langchain",
    "message_text",
    "response_from_ai",
    "to_ai_message",
    "to_langchain",
    "tool_message_of",
    "tool_result_of",
    "usage_from_metadata",
    "usage_metadata_of",
)

BLOCK_MEDIA_TYPE = "application/vnd.langchain.content-block+json"
"""A LangChain content block Tether has no part for, kept as it is."""
_PROVIDER = "langchain"
_REASONING_TYPES = frozenset({"reasoning", "thinking", "redacted_thinking"})


def _json(value: Any) -> JsonValue:
    """``value`` as plain JSON (tuples become lists; anything else fails loudly)."""
    loaded: JsonValue = json.loads(json.dumps(value))
    return loaded


def _reasoning_text(block: dict[str, Any]) -> str:
    if isinstance(block.get("reasoning"), str):
        return str(block["reasoning"])
    if isinstance(block.get("thinking"), str):
        return str(block["thinking"])
    summary = block.get("summary")
    if isinstance(summary, list):
        return "".join(str(item.get("text", "")) for item in summary if isinstance(item, dict))
    return ""


def _content_parts(content: str | list[str | dict[str, Any]]) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)] if content else []
    parts: list[Part] = []
    for block in content:
        if isinstance(block, str):
            parts.append(TextPart(text=block))
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(TextPart(text=block["text"]))
        elif block.get("type") in _REASONING_TYPES:
            opaque = json.dumps(block, sort_keys=True, separators=(",", ":"))
            parts.append(
                ThinkingPart(
                    text=_reasoning_text(block),
                    signature=block.get("signature"),
                    opaque=opaque,
                    provider=_PROVIDER,
                )
            )
        else:
            parts.append(DataPart(data=_json(block), media_type=BLOCK_MEDIA_TYPE))
    return parts


def message_text(content: str | list[str | dict[str, Any]]) -> str:
    """The text of a LangChain message content (text blocks joined, others skipped)."""
    return "".join(p.text for p in _content_parts(content) if isinstance(p, TextPart))


def _tool_call_parts(calls: Iterable[LCToolCall], *, mint: bool = False) -> list[Part]:
    # A live answer without ids gets fresh ones (they are recorded); a request keeps what
    # it has, so its hash stays the same on a resume.
    return [
        ToolCallPart(
            call_id=call["id"] or (f"call_{uuid.uuid4().hex}" if mint else ""),
            name=call["name"],
            args=_json(call["args"]),
        )
        for call in calls
    ]


def from_langchain(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as neutral ones, for hashing and recording."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AIMessage):
            parts = _content_parts(message.content) + _tool_call_parts(message.tool_calls)
            out.append(Message(role="assistant", parts=tuple(parts)))
        elif isinstance(message, ToolMessage):
            out.append(Message(role="tool", parts=(_tool_result_part(message),)))
        elif isinstance(message, SystemMessage):
            out.append(Message(role="system", parts=tuple(_content_parts(message.content))))
        else:
            out.append(Message(role="user", parts=tuple(_content_parts(message.content))))
    return out


def _tool_result_part(message: ToolMessage) -> ToolResultPart:
    content = message.content
    return ToolResultPart(
        call_id=message.tool_call_id,
        name=message.name,
        content=content if isinstance(content, str) else json.dumps(content),
        data=None if isinstance(content, str) else _json(content),
        is_error=message.status == "error",
    )


def _blocks(parts: Iterable[Part]) -> str | list[str | dict[str, Any]]:
    """Neutral parts as LangChain content: a plain string when it is only text."""
    kept = [p for p in parts if not isinstance(p, ToolCallPart | ToolResultPart)]
    if all(isinstance(p, TextPart) for p in kept):
        return "".join(p.text for p in kept if isinstance(p, TextPart))
    blocks: list[str | dict[str, Any]] = []
    for part in kept:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            block = json.loads(part.opaque) if part.opaque else None
            if not isinstance(block, dict):
                block = {"type": "reasoning", "reasoning": part.text}
                if part.signature is not None:
                    block["signature"] = part.signature
            blocks.append(block)
        elif isinstance(part, DataPart):
            if part.media_type == BLOCK_MEDIA_TYPE and isinstance(part.data, dict):
                blocks.append(dict(part.data))
            else:
                blocks.append({"type": "text", "text": json.dumps(part.data, sort_keys=True)})
        elif isinstance(part, FilePart):
            blocks.append({"type": "text", "text": f"[attachment {part.name or part.digest}]"})
    return blocks


def to_ai_message(message: Message, *, usage: Usage | None = None) -> AIMessage:
    """A neutral assistant message as LangChain's (tool call ids kept)."""
    calls = [
        LCToolCall(name=p.name, args=dict(p.args), id=p.call_id, type="tool_call")
        for p in message.tool_calls
    ]
    return AIMessage(
        content=_blocks(message.parts),
        tool_calls=calls,
        usage_metadata=usage_metadata_of(usage),
    )


def to_langchain(messages: Iterable[Message]) -> list[BaseMessage]:
    """Tether's transcript (``turn.history + turn.inputs``) as a graph's input messages."""
    out: list[BaseMessage] = []
    for message in messages:
        if message.role == "assistant":
            out.append(to_ai_message(message))
        elif message.role == "tool":
            for part in message.parts:
                if isinstance(part, ToolResultPart):
                    out.append(
                        ToolMessage(
                            content=part.content,
                            tool_call_id=part.call_id,
                            name=part.name,
                            status="error" if part.is_error else "success",
                        )
                    )
        elif message.role == "system":
            out.append(SystemMessage(content=_blocks(message.parts)))
        else:
            out.append(HumanMessage(content=_blocks(message.parts)))
    return out


def usage_from_metadata(metadata: UsageMetadata | None) -> Usage | None:
    if metadata is None:
        return None
    inputs: InputTokenDetails = metadata.get("input_token_details") or {}
    outputs: OutputTokenDetails = metadata.get("output_token_details") or {}
    return Usage(
        input_tokens=metadata.get("input_tokens"),
        output_tokens=metadata.get("output_tokens"),
        reasoning_tokens=outputs.get("reasoning"),
        cache_read_tokens=inputs.get("cache_read"),
        cache_write_tokens=inputs.get("cache_creation"),
    )


def usage_metadata_of(usage: Usage | None) -> UsageMetadata | None:
    if usage is None:
        return None
    inputs, outputs = usage.input_tokens or 0, usage.output_tokens or 0
    metadata = UsageMetadata(
        input_tokens=inputs, output_tokens=outputs, total_tokens=inputs + outputs
    )
    input_details = InputTokenDetails()
    if usage.cache_read_tokens is not None:
        input_details["cache_read"] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        input_details["cache_creation"] = usage.cache_write_tokens
    if input_details:
        metadata["input_token_details"] = input_details
    if usage.reasoning_tokens is not None:
        metadata["output_token_details"] = OutputTokenDetails(reasoning=usage.reasoning_tokens)
    return metadata


def response_from_ai(message: AIMessage) -> ModelResponse:
    """The framework model's answer in Tether's terms (what the journal records)."""
    parts = _content_parts(message.content) + _tool_call_parts(message.tool_calls, mint=True)
    metadata = message.response_metadata
    finish = metadata.get("finish_reason") or metadata.get("stop_reason")
    model = metadata.get("model_name") or metadata.get("model")
    response_id = metadata.get("id")  # the provider's (the message's own id may be LangChain's)
    return ModelResponse(
        message=Message(role="assistant", parts=tuple(parts)),
        usage=usage_from_metadata(message.usage_metadata),
        finish_reason=finish if isinstance(finish, str) else None,
        response_id=response_id if isinstance(response_id, str) and response_id else None,
        response_model=model if isinstance(model, str) and model else None,
    )


def tool_result_of(message: ToolMessage, call_id: str) -> ToolResult:
    """A LangChain tool's answer as the journal's outcome."""
    part = _tool_result_part(message)
    return ToolResult(
        call_id=call_id,
        content=part.content,
        data=part.data,
        is_error=part.is_error,
    )


def tool_message_of(result: ToolResult, name: str) -> ToolMessage:
    """A journaled outcome as the ToolMessage the graph gets (live and replay alike)."""
    content: str | list[str | dict[str, Any]] = result.content
    if isinstance(result.data, list):
        content = [item if isinstance(item, str | dict) else str(item) for item in result.data]
    return ToolMessage(
        content=content,
        tool_call_id=result.call_id,
        name=name,
        status="error" if result.is_error else "success",
    )
