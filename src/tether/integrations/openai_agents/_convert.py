"""Conversions between the Agents SDK's Responses-API items and Tether's neutral messages.

Plain text, function calls and reasoning summaries become neutral parts (so history, the
stream and other harnesses understand them); every other output item (hosted tool calls,
refusals, annotated text) travels whole in a ``DataPart`` and comes back byte for byte.
Ids that a provider mints per call are left out of the neutral request, so a resumed run
hashes the same input (I0).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from agents import FunctionTool, Handoff, ModelSettings, Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.items import ModelResponse as SdkResponse
from agents.items import TResponseInputItem, TResponseOutputItem
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.usage import Usage as SdkUsage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import JsonValue, TypeAdapter
from pydantic_core import to_jsonable_python

from tether.messages import (
    DataPart,
    FilePart,
    Message,
    ModelResponse,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)
from tether.stream import parse_tool_arguments

__all__ = (
    "ITEM_MEDIA_TYPE",
    "items_to_messages",
    "jsonable",
    "messages_to_items",
    "output_items",
    "reported",
    "response_from_sdk",
    "response_to_sdk",
    "settings_of",
    "tool_specs",
    "usage_from_sdk",
    "usage_to_sdk",
)

ITEM_MEDIA_TYPE = "application/vnd.openai.responses.item+json"
"""A Responses-API item carried whole (it has no neutral equivalent)."""

_OUTPUT_ITEM: TypeAdapter[ResponseOutputItem] = TypeAdapter(ResponseOutputItem)


def jsonable(value: object) -> JsonValue:
    """``value`` as JSON data (pydantic models and dataclasses dumped, the rest ``str``-ed)."""
    return cast(JsonValue, to_jsonable_python(value, fallback=str))


def _arguments_text(args: Mapping[str, JsonValue]) -> str:
    raw = args.get("raw")
    if len(args) == 1 and isinstance(raw, str) and parse_tool_arguments(raw) == {"raw": raw}:
        return raw  # the model's malformed text goes back as it came
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def _item_dict(item: object) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dumped = jsonable(item)
    return cast(dict[str, Any], dumped) if isinstance(dumped, dict) else {"value": dumped}


def _stable_id(prefix: str, *parts: object) -> str:
    digest = hashlib.sha256(json.dumps(jsonable(parts), sort_keys=True).encode()).hexdigest()
    return f"{prefix}_{digest[:32]}"


# --- SDK → neutral ----------------------------------------------------------------------------


def _content_parts(content: object) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Part] = []
    for raw in content if isinstance(content, list) else [content]:
        piece = _item_dict(raw)
        kind = piece.get("type")
        if kind in ("input_text", "output_text") and isinstance(piece.get("text"), str):
            parts.append(TextPart(text=piece["text"]))
        elif kind == "refusal" and isinstance(piece.get("refusal"), str):
            parts.append(TextPart(text=piece["refusal"]))
        else:
            piece.pop("id", None)
            parts.append(DataPart(data=jsonable(piece), media_type=ITEM_MEDIA_TYPE))
    return parts


def _reasoning_parts(item: Mapping[str, Any]) -> list[Part]:
    summary = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, Mapping)]
    opaque = item.get("encrypted_content")
    return [
        ThinkingPart(
            text=text,
            id=item.get("id"),
            opaque=opaque if isinstance(opaque, str) else None,
            provider="openai",
        )
        for text in summary or [""]
    ]


def items_to_messages(
    system_instructions: str | None, items: str | Sequence[TResponseInputItem]
) -> tuple[Message, ...]:
    """The neutral messages a model call sends (for the request hash; ids left out)."""
    messages: list[Message] = []
    if system_instructions:
        messages.append(Message.system(system_instructions))
    if isinstance(items, str):
        return (*messages, Message.user(items))
    for raw in items:
        item = _item_dict(raw)
        kind = item.get("type")
        if kind in (None, "message") and "role" in item:
            role = item["role"]
            neutral = "system" if role in ("system", "developer") else role
            if neutral not in ("system", "user", "assistant"):
                neutral = "user"
            messages.append(Message(role=neutral, parts=tuple(_content_parts(item["content"]))))
        elif kind == "function_call":
            part = ToolCallPart(
                call_id=str(item.get("call_id", "")),
                name=str(item.get("name", "")),
                args=parse_tool_arguments(item.get("arguments")),
            )
            messages.append(Message(role="assistant", parts=(part,)))
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(jsonable(output))
            result = ToolResultPart(call_id=str(item.get("call_id", "")), content=text)
            messages.append(Message(role="tool", parts=(result,)))
        elif kind == "reasoning":
            messages.append(Message(role="assistant", parts=tuple(_reasoning_parts(item))))
        else:
            item.pop("id", None)
            data = DataPart(data=jsonable(item), media_type=ITEM_MEDIA_TYPE)
            messages.append(Message(role="user", parts=(data,)))
    return tuple(messages)


def tool_specs(
    tools: Iterable[Tool], handoffs: Iterable[Handoff[Any, Any]]
) -> tuple[ToolSpec, ...]:
    """What the model is offered: function tools, hosted tools by name, handoffs as tools."""
    specs: list[ToolSpec] = []
    for tool in tools:
        if isinstance(tool, FunctionTool):
            params = cast(dict[str, JsonValue], jsonable(tool.params_json_schema))
            specs.append(ToolSpec(name=tool.name, description=tool.description, parameters=params))
        else:
            name = getattr(tool, "name", None)
            specs.append(ToolSpec(name=str(name or type(tool).__name__), description="hosted"))
    for handoff in handoffs:
        params = cast(dict[str, JsonValue], jsonable(handoff.input_json_schema))
        specs.append(
            ToolSpec(
                name=handoff.tool_name, description=handoff.tool_description, parameters=params
            )
        )
    return tuple(specs)


def settings_of(
    model_settings: ModelSettings, output_schema: AgentOutputSchemaBase | None
) -> dict[str, JsonValue]:
    """The call's settings as JSON (unset ones dropped), with the output schema if any."""
    settings: dict[str, JsonValue] = {
        key: value
        for key, value in cast(
            dict[str, JsonValue], jsonable(model_settings.to_json_dict())
        ).items()
        if value is not None
    }
    if output_schema is not None and not output_schema.is_plain_text():
        settings["output_schema"] = jsonable(output_schema.json_schema())
    return settings


def reported(usage: SdkUsage) -> bool:
    """Whether the provider reported token counts: the SDK counts an unreported call as 0
    tokens, and no real model call has 0 tokens in and out."""
    return bool(
        usage.input_tokens
        or usage.output_tokens
        or usage.total_tokens
        or usage.request_usage_entries
    )


def usage_from_sdk(usage: SdkUsage) -> Usage | None:
    """The call's usage, ``None`` when the provider reported none (not 0 tokens)."""
    if not reported(usage):
        return None
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        reasoning_tokens=usage.output_tokens_details.reasoning_tokens,
        cache_read_tokens=usage.input_tokens_details.cached_tokens,
        cache_write_tokens=getattr(usage.input_tokens_details, "cache_write_tokens", None),
    )


def response_from_sdk(response: SdkResponse) -> ModelResponse:
    """The SDK's model response as Tether's (one assistant message)."""
    parts: list[Part] = []
    has_calls = False
    for output in response.output:
        if isinstance(output, ResponseOutputMessage) and all(
            isinstance(c, ResponseOutputText) and not c.annotations for c in output.content
        ):
            parts.extend(TextPart(text=cast(ResponseOutputText, c).text) for c in output.content)
        elif isinstance(output, ResponseFunctionToolCall) and not output.namespace:
            has_calls = True
            parts.append(
                ToolCallPart(
                    call_id=output.call_id,
                    name=output.name,
                    args=parse_tool_arguments(output.arguments),
                )
            )
        elif isinstance(output, ResponseReasoningItem) and not output.content:
            parts.extend(_reasoning_parts(output.model_dump(mode="json")))
        else:
            data = jsonable(output)
            parts.append(DataPart(data=data, media_type=ITEM_MEDIA_TYPE))
    return ModelResponse(
        message=Message(role="assistant", parts=tuple(parts)),
        usage=usage_from_sdk(response.usage),
        finish_reason="tool_calls" if has_calls else "stop",
        # Chat Completions have no response id: the SDK's stand-in is not one.
        response_id=response.response_id
        if response.response_id and response.response_id != FAKE_RESPONSES_ID
        else None,
    )


# --- neutral → SDK ----------------------------------------------------------------------------


def output_items(message: Message) -> list[TResponseOutputItem]:
    """An assistant message as Responses output items (deterministic ids)."""
    items: list[TResponseOutputItem] = []
    texts: list[str] = []
    reasoning: list[ThinkingPart] = []

    def flush() -> None:
        if texts:
            content = [
                ResponseOutputText(type="output_text", text=t, annotations=[]) for t in texts
            ]
            items.append(
                ResponseOutputMessage(
                    id=_stable_id("msg", len(items), texts),
                    type="message",
                    role="assistant",
                    status="completed",
                    content=cast(Any, content),
                )
            )
            texts.clear()
        if reasoning:
            first = reasoning[0]
            items.append(
                ResponseReasoningItem(
                    id=first.id or _stable_id("rs", len(items), [p.text for p in reasoning]),
                    type="reasoning",
                    summary=[
                        Summary(type="summary_text", text=p.text) for p in reasoning if p.text
                    ],
                    encrypted_content=first.opaque,
                )
            )
            reasoning.clear()

    for part in message.parts:
        if isinstance(part, TextPart):
            if reasoning:
                flush()
            texts.append(part.text)
            continue
        if isinstance(part, ThinkingPart):
            if texts or (reasoning and reasoning[0].id != part.id):
                flush()
            reasoning.append(part)
            continue
        flush()
        if isinstance(part, ToolCallPart):
            items.append(
                ResponseFunctionToolCall(
                    id=f"fc_{part.call_id}",
                    type="function_call",
                    call_id=part.call_id,
                    name=part.name,
                    arguments=_arguments_text(part.args),
                    status="completed",
                )
            )
        elif isinstance(part, DataPart) and part.media_type == ITEM_MEDIA_TYPE:
            items.append(_OUTPUT_ITEM.validate_python(part.data))
    flush()
    return items


def usage_to_sdk(usage: Usage | None) -> SdkUsage:
    if usage is None:
        return SdkUsage(requests=1)
    input_tokens = usage.input_tokens or 0
    output_tokens = usage.output_tokens or 0
    return SdkUsage(
        requests=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        input_tokens_details=InputTokensDetails(
            cached_tokens=usage.cache_read_tokens or 0,
            cache_write_tokens=usage.cache_write_tokens or 0,
        ),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=usage.reasoning_tokens or 0),
    )


def response_to_sdk(response: ModelResponse) -> SdkResponse:
    """Tether's (journaled) response as the SDK's: the same live and in replay."""
    return SdkResponse(
        output=output_items(response.message),
        usage=usage_to_sdk(response.usage),
        response_id=None,
    )


def messages_to_items(messages: Iterable[Message]) -> list[TResponseInputItem]:
    """A Tether transcript as the SDK's input items."""
    items: list[TResponseInputItem] = []
    for message in messages:
        if message.role == "assistant":
            outputs = output_items(message)
            items.extend(
                SdkResponse(output=outputs, usage=SdkUsage(), response_id=None).to_input_items()
            )
            continue
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                items.append(
                    cast(
                        TResponseInputItem,
                        {
                            "type": "function_call_output",
                            "call_id": part.call_id,
                            "output": part.content,
                        },
                    )
                )
            elif isinstance(part, TextPart):
                role = "system" if message.role == "system" else "user"
                items.append(cast(TResponseInputItem, {"role": role, "content": part.text}))
            elif isinstance(part, DataPart):
                text = json.dumps(part.data, ensure_ascii=False)
                items.append(cast(TResponseInputItem, {"role": "user", "content": text}))
            elif isinstance(part, FilePart):
                note = f"[attachment {part.name or part.digest} ({part.media_type})]"
                items.append(cast(TResponseInputItem, {"role": "user", "content": note}))
    return items
