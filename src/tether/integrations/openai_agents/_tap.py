"""The OpenAI Agents tap: ``Runner.run_streamed(...).stream_events()`` → the canonical stream.

Raw Responses-API events give the incremental form (text, reasoning, tool requests as
Start/Delta/Done); run-item events give tool responses (and tool requests the raw stream did
not announce) as Full. Responses-API output indices restart with every model response, so
each slot gets an absolute message index that is never reused.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from agents import RawResponsesStreamEvent, RunItemStreamEvent, RunResultStreaming
from agents.items import ToolCallItem, ToolCallOutputItem
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseRefusalDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from pydantic import JsonValue

from tether.integrations.openai_agents._convert import jsonable, reported
from tether.stream import (
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolRequestDelta,
    ToolResponseContent,
    TurnUsage,
    parse_tool_arguments,
)

__all__ = ("OpenAIAgentsTurn", "convert_openai_agents_events")

logger = logging.getLogger("tether.integrations.openai_agents")

_FAILED = frozenset({"failed", "incomplete", "error"})


class _Converter:
    """The tap's state: which slot each open Responses item maps to."""

    def __init__(self) -> None:
        self.next_index = 0
        self.open: dict[tuple[str, int], int] = {}
        """(kind, output index) of the current response → message index."""
        self.calls: dict[int, tuple[str, str]] = {}
        """Output index of an open function call → (call id, name)."""
        self.announced: dict[str, str] = {}
        """Call id → tool name, for every tool request already yielded."""
        self.reasoning_blocks = 0

    def _slot(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index

    def _close(self, key: tuple[str, int]) -> list[StreamEvent]:
        index = self.open.pop(key, None)
        return [] if index is None else [StreamTaskMessageDone(index=index)]

    def close_all(self) -> list[StreamEvent]:
        done: list[StreamEvent] = [StreamTaskMessageDone(index=i) for i in self.open.values()]
        self.open.clear()
        self.calls.clear()
        return done

    def _text(self, output_index: int, delta: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        key = ("text", output_index)
        if key not in self.open:
            self.open[key] = self._slot()
            start = TextContent(author="agent", content="")
            events.append(StreamTaskMessageStart(index=self.open[key], content=start))
        events.append(
            StreamTaskMessageDelta(index=self.open[key], delta=TextDelta(text_delta=delta))
        )
        return events

    def _reasoning(self, output_index: int) -> tuple[int, list[StreamEvent]]:
        key = ("reasoning", output_index)
        if key in self.open:
            return self.open[key], []
        self.open[key] = index = self._slot()
        self.reasoning_blocks += 1
        content = ReasoningContent(author="agent", summary=[], content=[], style="active")
        return index, [StreamTaskMessageStart(index=index, content=content)]

    def raw(self, event: Any) -> list[StreamEvent]:
        if isinstance(event, ResponseCreatedEvent | ResponseCompletedEvent):
            return self.close_all()  # a new response restarts the output indices
        if isinstance(event, ResponseTextDeltaEvent | ResponseRefusalDeltaEvent):
            return self._text(event.output_index, event.delta)
        if isinstance(event, ResponseTextDoneEvent):
            return self._close(("text", event.output_index))
        if isinstance(event, ResponseReasoningSummaryTextDeltaEvent):
            index, events = self._reasoning(event.output_index)
            delta = ReasoningSummaryDelta(
                summary_index=event.summary_index, summary_delta=event.delta
            )
            return [*events, StreamTaskMessageDelta(index=index, delta=delta)]
        if isinstance(event, ResponseReasoningTextDeltaEvent):
            index, events = self._reasoning(event.output_index)
            content = ReasoningContentDelta(
                content_index=event.content_index, content_delta=event.delta
            )
            return [*events, StreamTaskMessageDelta(index=index, delta=content)]
        if isinstance(event, ResponseOutputItemAddedEvent):
            return self._added(event)
        if isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
            call = self.calls.get(event.output_index)
            slot = self.open.get(("call", event.output_index))
            if call is None or slot is None or not event.delta:
                return []
            arguments = ToolRequestDelta(
                tool_call_id=call[0], name=call[1], arguments_delta=event.delta
            )
            return [StreamTaskMessageDelta(index=slot, delta=arguments)]
        if isinstance(event, ResponseOutputItemDoneEvent):
            return self._done(event)
        return []

    def _added(self, event: ResponseOutputItemAddedEvent) -> list[StreamEvent]:
        item = event.item
        if not isinstance(item, ResponseFunctionToolCall):
            return []
        index = self._slot()
        self.open[("call", event.output_index)] = index
        self.calls[event.output_index] = (item.call_id, item.name)
        self.announced[item.call_id] = item.name
        content = ToolRequestContent(
            author="agent", name=item.name, tool_call_id=item.call_id, arguments={}
        )
        events: list[StreamEvent] = [StreamTaskMessageStart(index=index, content=content)]
        if item.arguments:
            delta = ToolRequestDelta(
                tool_call_id=item.call_id, name=item.name, arguments_delta=item.arguments
            )
            events.append(StreamTaskMessageDelta(index=index, delta=delta))
        return events

    def _done(self, event: ResponseOutputItemDoneEvent) -> list[StreamEvent]:
        item, at = event.item, event.output_index
        if isinstance(item, ResponseFunctionToolCall):
            self.calls.pop(at, None)
            if ("call", at) in self.open:
                return self._close(("call", at))
            self.announced[item.call_id] = item.name
            return [self._request_full(item.call_id, item.name, item.arguments)]
        if isinstance(item, ResponseOutputMessage):
            if ("text", at) in self.open:
                return self._close(("text", at))
            text = "".join(c.text for c in item.content if isinstance(c, ResponseOutputText))
            if not text:
                return []
            full = TextContent(author="agent", content=text)
            return [StreamTaskMessageFull(index=self._slot(), content=full)]
        if isinstance(item, ResponseReasoningItem) and ("reasoning", at) not in self.open:
            return self._reasoning_full(item)
        return self._close(("reasoning", at))

    def _reasoning_full(self, item: ResponseReasoningItem) -> list[StreamEvent]:
        """A reasoning item that arrived whole (no deltas): its summaries as ``summary``,
        its raw reasoning text (if the provider sent any) as ``content``."""
        summary = [s.text for s in item.summary if s.text]
        content = [c.text for c in item.content or () if c.text]
        if not summary and not content:
            return []  # an encrypted-only item: nothing to show
        self.reasoning_blocks += 1
        full = ReasoningContent(
            author="agent", summary=summary, content=content or None, style="static"
        )
        return [StreamTaskMessageFull(index=self._slot(), content=full)]

    def _request_full(self, call_id: str, name: str, arguments: str | None) -> StreamEvent:
        content = ToolRequestContent(
            author="agent",
            name=name,
            tool_call_id=call_id,
            arguments=parse_tool_arguments(arguments),
        )
        return StreamTaskMessageFull(index=self._slot(), content=content)

    def item(self, event: RunItemStreamEvent) -> list[StreamEvent]:
        item = event.item
        if event.name == "tool_called" and isinstance(item, ToolCallItem):
            call_id = item.call_id
            if not call_id or call_id in self.announced:
                return []
            name = item.tool_name or ""
            self.announced[call_id] = name
            arguments = _field(item.raw_item, "arguments")
            return [
                self._request_full(call_id, name, arguments if isinstance(arguments, str) else None)
            ]
        if event.name == "tool_output" and isinstance(item, ToolCallOutputItem):
            call_id = item.call_id or ""
            status = _field(item.raw_item, "status")
            response = ToolResponseContent(
                author="agent",
                name=self.announced.get(call_id, ""),
                tool_call_id=call_id,
                content=_content(item.output),
                is_error=(status in _FAILED) if isinstance(status, str) else None,
            )
            return [StreamTaskMessageFull(index=self._slot(), content=response)]
        return []


def _field(raw: object, name: str) -> object:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def _content(output: object) -> JsonValue:
    return output if isinstance(output, str) else jsonable(output)


async def convert_openai_agents_events(
    events: AsyncIterator[Any],
) -> AsyncGenerator[StreamEvent, None]:
    """The canonical stream of ``RunResultStreaming.stream_events()`` (closed when this stops).

    Example::

        result = Runner.run_streamed(agent, "hi")
        async for event in convert_openai_agents_events(result.stream_events()):
            print(event.type, event.index)
    """
    async with contextlib.aclosing(_convert(events, _Converter())) as converted:
        async for event in converted:
            yield event


async def _convert(
    events: AsyncIterator[Any], state: _Converter
) -> AsyncGenerator[StreamEvent, None]:
    try:
        async for event in events:
            if isinstance(event, RawResponsesStreamEvent):
                out = state.raw(event.data)
            elif isinstance(event, RunItemStreamEvent):
                out = state.item(event)
            else:
                logger.debug("openai-agents tap: skipped %s", type(event).__name__)
                continue
            for converted in out:
                yield converted
        for converted in state.close_all():
            yield converted
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()


class OpenAIAgentsTurn:
    """One ``Runner.run_streamed`` run as a :class:`~tether.stream.HarnessTurn`.

    Example::

        turn = OpenAIAgentsTurn(Runner.run_streamed(agent, "hi"), model="gpt-4.1")
        async for event in UnifiedEmitter().yield_turn(turn):
            await send(event)
        print(turn.usage())   # valid once the events are exhausted
    """

    def __init__(self, result_streaming: RunResultStreaming, model: str | None = None) -> None:
        self.result = result_streaming
        self.model = model
        self._converter = _Converter()
        self._exhausted = False

    @property
    def events(self) -> AsyncGenerator[StreamEvent, None]:
        return self._events()

    async def _events(self) -> AsyncGenerator[StreamEvent, None]:
        source = _convert(self.result.stream_events(), self._converter)
        try:
            async with contextlib.aclosing(source) as events:
                async for event in events:
                    yield event
            self._exhausted = True
        finally:
            if not self.result.is_complete:
                self.result.cancel()  # the consumer stopped early: stop the run too

    def usage(self) -> TurnUsage:
        """The run's usage (valid after ``events`` is exhausted; model only before)."""
        if not self._exhausted:
            return TurnUsage(model=self.model)
        usage = self.result.context_wrapper.usage
        counted = TurnUsage(
            model=self.model,
            num_tool_calls=len(self._converter.announced),
            num_reasoning_blocks=self._converter.reasoning_blocks,
            num_llm_calls=usage.requests,
        )
        if not reported(usage):
            return counted  # the provider reported no tokens: None, not 0
        return counted.model_copy(
            update={
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "total_tokens": usage.total_tokens,
                "cached_input_tokens": usage.input_tokens_details.cached_tokens,
                "reasoning_tokens": usage.output_tokens_details.reasoning_tokens,
            }
        )
