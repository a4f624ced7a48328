"""The LangGraph tap: ``graph.astream(..., stream_mode=["messages", "updates"])`` to the
canonical stream (reference §2.3).

Text and reasoning arrive as chunks in the ``messages`` mode and become Start/Delta/Done
slots; tool requests and tool responses arrive whole in the ``updates`` mode and become
Full events. What else the graph streams comes as Full data events: in the ``updates``
mode, each node's writes to channels other than ``messages`` (``kind``
``langgraph_update``); in the ``values`` mode, the state after each step
(``langgraph_values``); in the ``custom`` mode, what a node's stream writer wrote
(``langgraph_custom``). Differences from agentex's tap, all deliberate:

- a whole ``AIMessage`` in the ``messages`` mode (a model that does not stream, or Tether's
  journaled model) is treated like one chunk, where agentex drops its text;
- updates from any node count, not only ``agent`` and ``tools``; a message (or a tool call
  id) already emitted is not emitted again, so a node returning the whole history is safe;
- a ToolMessage with ``status == "error"`` gives ``is_error=True``;
- a reasoning summary in ``additional_kwargs`` opens its reasoning slot first, so every
  Delta has a Start.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from tether.stream import (
    DataContent,
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
    ToolResponseContent,
    TurnUsage,
)

__all__ = (
    "CUSTOM_KIND",
    "UPDATE_KIND",
    "LangGraphTurn",
    "convert_langgraph_events",
    "langgraph_usage",
)

UPDATE_KIND = "langgraph_update"
"""The ``kind`` of a data event of a node's writes besides its messages (``updates`` mode)."""
CUSTOM_KIND = "langgraph_custom"
"""The ``kind`` of a data event of what a node's stream writer wrote (``custom`` mode)."""

OnAIMessage = Callable[[AIMessage], Awaitable[None] | None]
_REASONING = frozenset({"reasoning", "thinking"})


def _reasoning_text(block: dict[str, Any]) -> str:
    summary = block.get("summary")
    if isinstance(summary, list):
        return "".join(
            str(s.get("text", ""))
            for s in summary
            if isinstance(s, dict) and s.get("type") == "summary_text"
        )
    for key in ("reasoning", "thinking"):
        if isinstance(block.get(key), str):
            return str(block[key])
    return ""


def _messages_of(update: Any) -> list[BaseMessage]:
    """The messages a node wrote in one ``updates`` entry (one message, a list, or several
    writes)."""
    if isinstance(update, list | tuple):
        return [m for item in update for m in _messages_of(item)]
    if not isinstance(update, dict):
        return []
    messages = update.get("messages")
    if isinstance(messages, BaseMessage):
        return [messages]
    if isinstance(messages, list | tuple):
        return [m for m in messages if isinstance(m, BaseMessage)]
    return []


def _other_channels(update: Any) -> dict[str, JsonValue]:
    """A node's writes to channels other than ``messages`` (those come as messages)."""
    if not isinstance(update, dict):
        return {}
    return {str(k): _jsonable(v) for k, v in update.items() if k != "messages"}


def _jsonable(value: Any) -> JsonValue:
    """``value`` as JSON: messages and pydantic models by their fields, anything JSON cannot
    hold by its ``repr`` (a stream event is shown, never replayed)."""
    return cast(JsonValue, to_jsonable_python(value, fallback=repr))


def _tool_content(message: ToolMessage) -> str | list[Any] | dict[str, Any]:
    content = message.content
    if isinstance(content, str):
        return content
    return [item if isinstance(item, str | dict) else str(item) for item in content]


class _Converter:
    def __init__(self) -> None:
        self.index = 0
        self.text_open = False
        self.reasoning_open = False
        self._requested: set[str] = set()
        self._answered: set[str] = set()
        self._seen: set[str] = set()

    def close(self) -> list[StreamEvent]:
        if not (self.text_open or self.reasoning_open):
            return []
        self.text_open = self.reasoning_open = False
        done = StreamTaskMessageDone(index=self.index)
        self.index += 1
        return [done]

    def text(self, text: str) -> list[StreamEvent]:
        events = self.close() if self.reasoning_open else []
        if not self.text_open:
            self.text_open = True
            content = TextContent(author="agent", content="")
            events.append(StreamTaskMessageStart(index=self.index, content=content))
        events.append(StreamTaskMessageDelta(index=self.index, delta=TextDelta(text_delta=text)))
        return events

    def open_reasoning(self) -> list[StreamEvent]:
        if self.reasoning_open:
            return []
        events = self.close()
        self.reasoning_open = True
        content = ReasoningContent(author="agent", summary=[], content=[], style="active")
        events.append(StreamTaskMessageStart(index=self.index, content=content))
        return events

    def chunk(self, chunk: AIMessage) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        content = chunk.content
        if isinstance(content, str):
            if content:
                events += self.text(content)
        else:
            for block in content:
                if isinstance(block, str):
                    events += self.text(block) if block else []
                elif block.get("type") == "text" and block.get("text"):
                    events += self.text(str(block["text"]))
                elif block.get("type") in _REASONING and (text := _reasoning_text(block)):
                    events += self.open_reasoning()
                    delta = ReasoningContentDelta(content_index=0, content_delta=text)
                    events.append(StreamTaskMessageDelta(index=self.index, delta=delta))
        reasoning = chunk.additional_kwargs.get("reasoning")
        summary = reasoning.get("summary") if isinstance(reasoning, dict) else None
        for si, item in enumerate(summary if isinstance(summary, list) else ()):
            if isinstance(item, dict) and item.get("type") == "summary_text" and item.get("text"):
                events += self.open_reasoning()
                summary_delta = ReasoningSummaryDelta(
                    summary_index=si, summary_delta=str(item["text"])
                )
                events.append(StreamTaskMessageDelta(index=self.index, delta=summary_delta))
        return events

    def data(self, data: dict[str, JsonValue]) -> list[StreamEvent]:
        return self.full(DataContent(author="agent", data=data))

    def full(
        self, content: ToolRequestContent | ToolResponseContent | DataContent
    ) -> list[StreamEvent]:
        events = self.close()
        events.append(StreamTaskMessageFull(index=self.index, content=content))
        self.index += 1
        return events

    def is_new_ai(self, message: AIMessage) -> bool:
        if message.id is None:
            return True
        if message.id in self._seen:
            return False
        self._seen.add(message.id)
        return True

    def requests(self, message: AIMessage) -> list[StreamEvent]:
        events = self.close()
        for call in message.tool_calls:
            call_id = call["id"] or ""
            if call_id in self._requested:
                continue
            self._requested.add(call_id)
            request = ToolRequestContent(
                author="agent", tool_call_id=call_id, name=call["name"], arguments=call["args"]
            )
            events += self.full(request)
        return events

    def response(self, message: ToolMessage) -> list[StreamEvent]:
        if message.tool_call_id in self._answered:
            return []
        self._answered.add(message.tool_call_id)
        response = ToolResponseContent(
            author="agent",
            tool_call_id=message.tool_call_id,
            name=message.name or "unknown",
            content=_tool_content(message),
            is_error=True if message.status == "error" else None,
        )
        return self.full(response)


async def convert_langgraph_events(
    stream: AsyncIterator[Any], on_final_ai_message: OnAIMessage | None = None
) -> AsyncGenerator[StreamEvent, None]:
    """The canonical events of ``graph.astream(..., stream_mode=["messages", "updates"])``.

    ``on_final_ai_message`` gets each complete AI message a node wrote (sync or async), after
    its tool request events were yielded. The source is closed however iteration ends.

    Example::

        source = graph.astream(inputs, stream_mode=["messages", "updates"])
        async for event in convert_langgraph_events(source):
            print(event.type, event.index)
    """
    state = _Converter()
    try:
        async for item in stream:
            if not (isinstance(item, tuple) and len(item) == 2):
                continue
            mode, data = item
            if mode == "messages":
                chunk = data[0] if isinstance(data, tuple | list) and data else None
                if isinstance(chunk, AIMessage):
                    for event in state.chunk(chunk):
                        yield event
            elif mode == "custom":
                for event in state.data({"kind": CUSTOM_KIND, "data": _jsonable(data)}):
                    yield event
            elif mode == "values":
                for event in state.data({"kind": "langgraph_values", "values": _jsonable(data)}):
                    yield event
            elif mode == "updates" and isinstance(data, dict):
                for node, update in data.items():
                    for message in _messages_of(update):
                        if isinstance(message, AIMessage):
                            if not state.is_new_ai(message):
                                continue
                            for event in state.requests(message):
                                yield event
                            if on_final_ai_message is not None:
                                outcome = on_final_ai_message(message)
                                if inspect.isawaitable(outcome):
                                    await outcome
                        elif isinstance(message, ToolMessage):
                            for event in state.response(message):
                                yield event
                    written = _other_channels(update)
                    if written:
                        update_data = {"kind": UPDATE_KIND, "node": str(node)}
                        for event in state.data({**update_data, "update": written}):
                            yield event
        for event in state.close():
            yield event
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()  # a consumer that stops early must not leave the graph running


def _add(total: int | None, value: Any) -> int | None:
    if not isinstance(value, int):
        return total
    return value if total is None else total + value


def langgraph_usage(messages: Iterable[AIMessage], model: str | None = None) -> TurnUsage:
    """Usage summed over AI messages' ``usage_metadata`` (None stays None, a real 0 stays 0).

    ``num_llm_calls`` counts the messages; ``model`` defaults to the last reported model name.
    """
    usage = TurnUsage(model=model, num_llm_calls=0)
    for message in messages:
        usage.num_llm_calls = (usage.num_llm_calls or 0) + 1
        name = message.response_metadata.get("model_name")
        if model is None and isinstance(name, str):
            usage.model = name
        metadata = message.usage_metadata
        if metadata is None:
            continue
        usage.input_tokens = _add(usage.input_tokens, metadata.get("input_tokens"))
        usage.output_tokens = _add(usage.output_tokens, metadata.get("output_tokens"))
        usage.total_tokens = _add(usage.total_tokens, metadata.get("total_tokens"))
        details_in = metadata.get("input_token_details") or {}
        details_out = metadata.get("output_token_details") or {}
        usage.cached_input_tokens = _add(usage.cached_input_tokens, details_in.get("cache_read"))
        usage.reasoning_tokens = _add(usage.reasoning_tokens, details_out.get("reasoning"))
    return usage


class LangGraphTurn:
    """One LangGraph turn for ``UnifiedEmitter``: its events, then its summed usage.

    Example::

        turn = LangGraphTurn(graph.astream(inputs, stream_mode=["messages", "updates"]))
        async for event in UnifiedEmitter().yield_turn(turn):
            await send(event)
        print(turn.usage().total_tokens)
    """

    def __init__(self, stream: AsyncIterator[Any], model: str | None = None) -> None:
        self._stream = stream
        self._model = model
        self._messages: list[AIMessage] = []
        self._events: AsyncGenerator[StreamEvent, None] | None = None
        self._counted: TurnUsage | None = None

    @property
    def events(self) -> AsyncIterator[StreamEvent]:
        """The canonical events (one iteration: the graph's stream is consumed once)."""
        if self._events is None:
            self._events = self._run()
        return self._events

    async def _run(self) -> AsyncGenerator[StreamEvent, None]:
        tool_calls = reasoning_blocks = 0
        converted = convert_langgraph_events(self._stream, self._messages.append)
        async with contextlib.aclosing(converted) as events:
            async for event in events:
                if (
                    isinstance(event, StreamTaskMessageFull)
                    and event.content.type == "tool_request"
                ):
                    tool_calls += 1
                elif (
                    isinstance(event, StreamTaskMessageStart) and event.content.type == "reasoning"
                ):
                    reasoning_blocks += 1
                yield event
        usage = langgraph_usage(self._messages, self._model)
        usage.num_tool_calls = tool_calls
        usage.num_reasoning_blocks = reasoning_blocks
        self._counted = usage

    def usage(self) -> TurnUsage:
        """Valid once ``events`` is exhausted; before that, only the model is known."""
        return self._counted if self._counted is not None else TurnUsage(model=self._model)
