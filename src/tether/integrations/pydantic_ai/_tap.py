"""pydantic-ai agent events (``run_stream_events`` / ``iter``) as the canonical stream.

pydantic-ai numbers parts per model response, restarting at 0, so the tap keeps its own
message index, one per slot and never reused, and maps each response's part index to it.
Unlike agentex's tap, tool responses carry ``is_error`` when pydantic-ai reports a
failed, retried or denied call.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from pydantic_ai import messages as pa
from pydantic_ai.run import AgentRunResult, AgentRunResultEvent
from pydantic_ai.usage import RunUsage

from tether.integrations.pydantic_ai._convert import jsonable
from tether.stream import (
    ReasoningContent,
    ReasoningContentDelta,
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
)

__all__ = ("PydanticAITurn", "pydantic_ai_events")

logger = logging.getLogger("tether.integrations.pydantic_ai")

ResultCallback = Callable[[AgentRunResultEvent[Any]], Awaitable[None] | None]
EventSource = AsyncIterator[Any] | AbstractAsyncContextManager[AsyncIterator[Any]]


def _response_content(part: pa.ToolReturnPart) -> Any:
    """Primitives, lists and dicts as they are, pydantic objects dumped; what a failed call
    says to the model (a retry prompt, say) as text."""
    content = part.content
    if part.outcome != "success":
        return part.model_response_str()
    if content is None:
        return ""
    if isinstance(content, str | int | float | bool | list | dict) or hasattr(
        content, "model_dump"
    ):
        return jsonable(content)
    return str(content)


class _Converter:
    def __init__(self) -> None:
        self.next_index = 0
        self.by_part: dict[int, int] = {}
        self.tools: dict[int, tuple[str, str]] = {}

    def _open(self, part_index: int) -> int:
        index = self.next_index
        self.next_index += 1
        self.by_part[part_index] = index  # a new response reuses part indices: overwrite
        return index

    def start(self, event: pa.PartStartEvent) -> list[StreamEvent]:
        part = event.part
        if isinstance(part, pa.TextPart):
            index = self._open(event.index)
            out: list[StreamEvent] = [
                StreamTaskMessageStart(index=index, content=TextContent(author="agent", content=""))
            ]
            if part.content:  # initial text always travels as a delta
                out.append(_delta(index, TextDelta(text_delta=part.content)))
            return out
        if isinstance(part, pa.ThinkingPart):
            index = self._open(event.index)
            content = ReasoningContent(author="agent", summary=[], content=[], style="active")
            out = [StreamTaskMessageStart(index=index, content=content)]
            if part.content:
                out.append(_delta(index, _reasoning(part.content)))
            return out
        if isinstance(part, pa.ToolCallPart):
            index = self._open(event.index)
            self.tools[index] = (part.tool_call_id, part.tool_name)
            arguments = part.args if isinstance(part.args, dict) else {}
            request = ToolRequestContent(
                author="agent",
                tool_call_id=part.tool_call_id,
                name=part.tool_name,
                arguments=jsonable(arguments),
            )
            out = [StreamTaskMessageStart(index=index, content=request)]
            if isinstance(part.args, str) and part.args:
                out.append(_delta(index, self._tool_delta(index, part.args)))
            return out
        logger.debug("pydantic-ai part %s has no canonical form; skipped", type(part).__name__)
        return []

    def _tool_delta(self, index: int, arguments: str) -> ToolRequestDelta:
        call_id, name = self.tools[index]
        return ToolRequestDelta(tool_call_id=call_id, name=name, arguments_delta=arguments)

    def delta(self, event: pa.PartDeltaEvent) -> list[StreamEvent]:
        index = self.by_part.get(event.index)
        if index is None:
            return []
        delta = event.delta
        if isinstance(delta, pa.TextPartDelta):
            return [_delta(index, TextDelta(text_delta=delta.content_delta))]
        if isinstance(delta, pa.ThinkingPartDelta):
            return [_delta(index, _reasoning(delta.content_delta))] if delta.content_delta else []
        if isinstance(delta, pa.ToolCallPartDelta):
            if index not in self.tools:  # no start seen: the delta names the call
                self.tools[index] = (delta.tool_call_id or "", delta.tool_name_delta or "")
            args = delta.args_delta
            text = args if isinstance(args, str) else json.dumps(args) if args else ""
            return [_delta(index, self._tool_delta(index, text))]
        return []

    def end(self, event: pa.PartEndEvent) -> list[StreamEvent]:
        index = self.by_part.get(event.index)
        return [] if index is None else [StreamTaskMessageDone(index=index)]

    def tool_result(self, event: pa.FunctionToolResultEvent) -> list[StreamEvent]:
        part = event.part
        failed = part.outcome != "success"
        index = self.next_index
        self.next_index += 1
        content = ToolResponseContent(
            author="agent",
            tool_call_id=part.tool_call_id,
            name=part.tool_name or "",
            content=_response_content(part),
            is_error=True if failed else None,
        )
        return [StreamTaskMessageFull(index=index, content=content)]


def _delta(index: int, delta: Any) -> StreamTaskMessageDelta:
    return StreamTaskMessageDelta(index=index, delta=delta)


def _reasoning(text: str | None) -> ReasoningContentDelta:
    return ReasoningContentDelta(content_index=0, content_delta=text)


async def pydantic_ai_events(
    source: EventSource, on_result: ResultCallback | None = None
) -> AsyncGenerator[StreamEvent, None]:
    """The canonical events of a pydantic-ai event stream (``run_stream_events``, whose
    context this enters, or any iterator of agent events, such as one fed from ``iter``).
    The final result goes to ``on_result`` (sync or async) and yields nothing. The source
    is closed when this stops, however it stops.

    Example::

        async for event in pydantic_ai_events(agent.run_stream_events("hi")):
            print(event.type, event.index)
    """
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(source, AbstractAsyncContextManager):
            stream: AsyncIterator[Any] = await stack.enter_async_context(source)
        else:
            stream = source
        async with contextlib.aclosing(_convert(stream, on_result)) as events:
            async for event in events:
                yield event


async def _convert(
    stream: AsyncIterator[Any], on_result: ResultCallback | None
) -> AsyncGenerator[StreamEvent, None]:
    converter = _Converter()
    try:
        async for event in stream:
            if isinstance(event, pa.PartStartEvent):
                out = converter.start(event)
            elif isinstance(event, pa.PartDeltaEvent):
                out = converter.delta(event)
            elif isinstance(event, pa.PartEndEvent):
                out = converter.end(event)
            elif isinstance(event, pa.FunctionToolResultEvent):
                out = converter.tool_result(event)
            elif isinstance(event, AgentRunResultEvent):
                if on_result is not None:
                    outcome = on_result(event)
                    if inspect.isawaitable(outcome):
                        await outcome
                continue
            else:
                continue
            for converted in out:
                yield converted
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(RuntimeError):  # already closed or running elsewhere
                await aclose()


class PydanticAITurn:
    """A pydantic-ai run as a :class:`~tether.stream.HarnessTurn`: its canonical events,
    then its usage (valid once the events are exhausted).

    Example::

        turn = PydanticAITurn(agent.run_stream_events("hi"), model="openai:gpt-4o")
        async for event in UnifiedEmitter().yield_turn(turn):
            ...
        print(turn.usage().output_tokens)
    """

    def __init__(self, stream: EventSource, model: str | None = None) -> None:
        self._stream = stream
        self._usage = TurnUsage(model=model)

    @property
    def events(self) -> AsyncIterator[StreamEvent]:
        return pydantic_ai_events(self._stream, on_result=self._on_result)

    def _on_result(self, event: AgentRunResultEvent[Any]) -> None:
        self._usage = usage_of(event.result, self._usage.model)

    def usage(self) -> TurnUsage:
        return self._usage


def usage_of(result: AgentRunResult[Any], model: str | None = None) -> TurnUsage:
    """A finished run's usage: provider-reported counts, plus tool calls and reasoning
    blocks counted from its new messages."""
    # A property in current pydantic-ai, a method in older 2.x releases.
    usage = result.usage if isinstance(result.usage, RunUsage) else result.usage()
    messages = result.new_messages()
    parts = [p for m in messages if isinstance(m, pa.ModelResponse) for p in m.parts]
    return TurnUsage(
        model=model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cache_read_tokens,
        total_tokens=usage.total_tokens,
        num_llm_calls=usage.requests,
        num_tool_calls=sum(isinstance(p, pa.ToolCallPart) for p in parts),
        num_reasoning_blocks=sum(isinstance(p, pa.ThinkingPart) for p in parts),
    )
