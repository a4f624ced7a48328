"""An offline Agents SDK ``Model``: answers from a rule over its input, streams real events."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from agents import Handoff, Model, ModelSettings, ModelTracing, Tool
from agents.agent_output import AgentOutputSchemaBase
from agents.items import (
    ModelResponse,
    TResponseInputItem,
    TResponseOutputItem,
    TResponseStreamEvent,
)
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam
from openai.types.responses.response_reasoning_item import Content, Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

Rule = Callable[[list[dict[str, Any]]], list[TResponseOutputItem]]

LOG_ENV = "TETHER_TEST_OA_MODEL_LOG"


def text(value: str, item_id: str = "msg_1") -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=value, annotations=[])],
    )


def call(name: str, arguments: str, call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}", type="function_call", call_id=call_id, name=name, arguments=arguments
    )


def reasoning(summary: str, content: str | None = None) -> ResponseReasoningItem:
    return ResponseReasoningItem(
        id="rs_1",
        type="reasoning",
        summary=[Summary(type="summary_text", text=summary)],
        content=[Content(type="reasoning_text", text=content)] if content else None,
    )


def input_dicts(items: str | list[TResponseInputItem]) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return [dict(i) if isinstance(i, dict) else dict(i.model_dump()) for i in items]


USAGE = ResponseUsage(
    input_tokens=10,
    output_tokens=5,
    total_tokens=15,
    input_tokens_details=InputTokensDetails(cached_tokens=2, cache_write_tokens=0),
    output_tokens_details=OutputTokensDetails(reasoning_tokens=1),
)


def stream_events(output: Sequence[TResponseOutputItem]) -> list[TResponseStreamEvent]:
    """Realistic Responses stream events for ``output``, ending in ``response.completed``."""
    seq = iter(range(10_000))
    response = Response(
        id="resp_1",
        object="response",
        created_at=0,
        model="scripted",
        output=list(output),
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
        status="completed",
        usage=USAGE,
    )
    events: list[TResponseStreamEvent] = [
        ResponseCreatedEvent(
            type="response.created",
            sequence_number=next(seq),
            response=response.model_copy(update={"output": [], "status": "in_progress"}),
        )
    ]
    for index, item in enumerate(output):
        if isinstance(item, ResponseOutputMessage):
            empty = item.model_copy(update={"content": [], "status": "in_progress"})
            events.append(
                ResponseOutputItemAddedEvent(
                    type="response.output_item.added",
                    item=empty,
                    output_index=index,
                    sequence_number=next(seq),
                )
            )
            for ci, part in enumerate(item.content):
                assert isinstance(part, ResponseOutputText)
                blank = ResponseOutputText(type="output_text", text="", annotations=[])
                events.append(
                    ResponseContentPartAddedEvent(
                        type="response.content_part.added",
                        item_id=item.id,
                        output_index=index,
                        content_index=ci,
                        part=blank,
                        sequence_number=next(seq),
                    )
                )
                half = len(part.text) // 2
                for chunk in (part.text[:half], part.text[half:]):
                    events.append(
                        ResponseTextDeltaEvent(
                            type="response.output_text.delta",
                            item_id=item.id,
                            output_index=index,
                            content_index=ci,
                            delta=chunk,
                            logprobs=[],
                            sequence_number=next(seq),
                        )
                    )
                events.append(
                    ResponseContentPartDoneEvent(
                        type="response.content_part.done",
                        item_id=item.id,
                        output_index=index,
                        content_index=ci,
                        part=part,
                        sequence_number=next(seq),
                    )
                )
        elif isinstance(item, ResponseFunctionToolCall):
            events.append(
                ResponseOutputItemAddedEvent(
                    type="response.output_item.added",
                    item=item.model_copy(update={"arguments": ""}),
                    output_index=index,
                    sequence_number=next(seq),
                )
            )
            half = len(item.arguments) // 2
            for chunk in (item.arguments[:half], item.arguments[half:]):
                events.append(
                    ResponseFunctionCallArgumentsDeltaEvent(
                        type="response.function_call_arguments.delta",
                        item_id=item.id or "",
                        output_index=index,
                        delta=chunk,
                        sequence_number=next(seq),
                    )
                )
            events.append(
                ResponseFunctionCallArgumentsDoneEvent(
                    type="response.function_call_arguments.done",
                    item_id=item.id or "",
                    output_index=index,
                    name=item.name,
                    arguments=item.arguments,
                    sequence_number=next(seq),
                )
            )
        elif isinstance(item, ResponseReasoningItem):
            events.append(
                ResponseOutputItemAddedEvent(
                    type="response.output_item.added",
                    item=item.model_copy(update={"summary": [], "content": None}),
                    output_index=index,
                    sequence_number=next(seq),
                )
            )
            for si, summary in enumerate(item.summary):
                events.append(
                    ResponseReasoningSummaryTextDeltaEvent(
                        type="response.reasoning_summary_text.delta",
                        item_id=item.id,
                        output_index=index,
                        summary_index=si,
                        delta=summary.text,
                        sequence_number=next(seq),
                    )
                )
            for ci, content in enumerate(item.content or []):
                events.append(
                    ResponseReasoningTextDeltaEvent(
                        type="response.reasoning_text.delta",
                        item_id=item.id,
                        output_index=index,
                        content_index=ci,
                        delta=content.text,
                        sequence_number=next(seq),
                    )
                )
        events.append(
            ResponseOutputItemDoneEvent(
                type="response.output_item.done",
                item=item,
                output_index=index,
                sequence_number=next(seq),
            )
        )
    events.append(
        ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=next(seq)
        )
    )
    return events


class ScriptedModel(Model):
    """Answers each call with ``rule(input items)``; logs a line per call to ``$LOG_ENV``."""

    def __init__(self, rule: Rule) -> None:
        self.model = "scripted"  # the name the journal hashes; a replay's model shares it
        self.rule = rule
        self.calls: list[list[dict[str, Any]]] = []

    def _answer(self, items: str | list[TResponseInputItem]) -> list[TResponseOutputItem]:
        seen = input_dicts(items)
        self.calls.append(seen)
        log = os.environ.get(LOG_ENV)
        if log:
            digest = hashlib.sha256(json.dumps(seen, sort_keys=True, default=str).encode())
            with open(log, "a", encoding="utf-8") as out:
                out.write(digest.hexdigest() + "\n")
        return self.rule(seen)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        usage = Usage(
            requests=1,
            input_tokens=10,
            output_tokens=5,
            total_tokens=15,
            input_tokens_details=InputTokensDetails(cached_tokens=2, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=1),
        )
        return ModelResponse(output=self._answer(input), usage=usage, response_id="resp_1")

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        for event in stream_events(self._answer(input)):
            yield event


class ForbiddenModel(ScriptedModel):
    """Fails the test if it is ever asked (a replay must make zero model calls)."""

    def __init__(self) -> None:
        super().__init__(self._fail)

    @staticmethod
    def _fail(items: list[dict[str, Any]]) -> list[TResponseOutputItem]:
        raise AssertionError(f"the model was called: {items}")


def weather_rule(items: list[dict[str, Any]]) -> list[TResponseOutputItem]:
    """Ask for the weather tool once, then answer with what it returned."""
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    users = [i for i in items if i.get("role") == "user"]
    if len(outputs) < len(users):
        city = str(users[-1].get("content"))
        return [call("get_weather", json.dumps({"city": city}), f"call_{len(users)}")]
    return [text(f"The weather: {outputs[-1]['output']}")]
