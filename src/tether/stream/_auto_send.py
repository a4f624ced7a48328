"""Writing a framework turn's canonical events into the durable log (``auto_send_turn``): the
one module of the stream that writes, and so the only one that imports the journal.

A tapped framework runs its own model and tools, so the journal cannot re-run them. What it
can do is make the turn's output durable: each assistant message (text, reasoning, tool
requests) becomes a journaled completion whose chunks stream as delta records, and each tool
response becomes a reported tool outcome. The log then shows the turn on SSE, survives
restarts, and replays it without the framework: a replay serves the recorded messages and
never pulls the source. A crash mid-turn cannot resume the framework in the middle; the
resumed execution keeps what was recorded and runs the framework turn again from its start.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from pydantic import JsonValue

from tether.journal import Turn
from tether.messages import (
    DataPart,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResult,
    Usage,
)
from tether.models import DeltaSink, StreamDelta
from tether.records import ModelCalled, ToolOutcome
from tether.stream._arguments import parse_tool_arguments
from tether.stream._turn import HarnessTurn, TurnResult, TurnUsage
from tether.stream._types import (
    MessageContent,
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
    ToolResponseDelta,
)

__all__ = ("USAGE_STEP", "AutoSend", "auto_send")

USAGE_STEP = "tether.turn_usage"
"""The step that closes an auto-sent turn, carrying its usage (a replay returns it)."""

Trace = Callable[[StreamEvent], Awaitable[None]]
"""Hears each event as it is pulled off the source (what spans are derived from)."""


async def auto_send(turn: HarnessTurn, journal: Turn, trace: Trace) -> TurnResult:
    """Write ``turn`` into the durable log through ``journal`` (see the module docstring).
    The source is closed however this ends: never started on a replay, cut short on a
    failure."""
    events = turn.events
    sender = AutoSend(journal, events, turn.usage().model or "tap", trace, turn.usage)
    try:
        usage = await sender.run()
    finally:
        if isinstance(events, AsyncGenerator):
            await events.aclose()
    return TurnResult(final_text=sender.final_text, usage=usage)


@dataclass
class _Slot:
    """One message slot being assembled from a Start (or Full) and its deltas."""

    content: MessageContent
    text: str = ""
    parts: list[str] = field(default_factory=list)

    def part(self) -> Part:
        content = self.content
        if isinstance(content, TextContent):
            return TextPart(text=content.content + self.text)
        if isinstance(content, ReasoningContent):
            return ThinkingPart(
                text="".join([*content.summary, *(content.content or ()), self.text])
            )
        if isinstance(content, ToolRequestContent):
            arguments = parse_tool_arguments(self.text) if self.text else content.arguments
            return ToolCallPart(call_id=content.tool_call_id, name=content.name, args=arguments)
        assert not isinstance(content, ToolResponseContent)
        return DataPart(data=content.data)

    def result(self) -> ToolResult:
        content = self.content
        assert isinstance(content, ToolResponseContent)
        value = content.content
        if isinstance(value, str) or value is None:
            text, data = (value or "") + self.text, None
        else:
            text, data = json.dumps(value, sort_keys=True), value
        return ToolResult(
            call_id=content.tool_call_id, content=text, data=data, is_error=bool(content.is_error)
        )


class AutoSend:
    """One framework turn written through a journal turn (see the module docstring)."""

    def __init__(
        self,
        journal: Turn,
        events: AsyncIterator[StreamEvent],
        model: str,
        trace: Trace,
        usage: Callable[[], TurnUsage],
    ) -> None:
        self._journal = journal
        self._events = events
        self._model = model
        self._trace = trace
        self._usage = usage
        self._pushed: list[StreamEvent] = []
        self._responding: dict[int, _Slot] = {}
        self._messages = 0
        self._usage_landed = False
        """Whether a completion carries the turn's usage (the last message read to the end)."""
        self.final_text = ""

    async def run(self) -> TurnUsage:
        """Serve what was recorded, go on live from the source, and close with the usage."""
        usage = self._usage
        while True:
            recorded = self._journal.next_recorded()
            if recorded is not None:
                if recorded.kind == ModelCalled.KIND:
                    await self._message()
                elif recorded.kind == ToolOutcome.KIND:
                    payload = recorded.payload
                    assert isinstance(payload, ToolOutcome)
                    await self._journal.report(ToolResult(call_id=payload.call_id, content=""))
                else:  # the closing step (or a record the journal will refuse as divergent)
                    return await self._close(usage)
                continue
            event = await self._peek()
            if event is None:
                if not self._usage_landed and _billed(*_spent(usage())):
                    # The turn ended on tool responses: its usage comes as a message of its
                    # own, with no parts, so that the ledger and the budgets count it.
                    await self._message()
                    continue
                return await self._close(usage)
            if self._is_response(event):
                await self._tool_responses()
            elif isinstance(event, StreamTaskMessageStart | StreamTaskMessageFull):
                await self._message()
            else:
                await self._next()  # a delta or done for no open slot: dropped, as agentex does

    # --- the source ---------------------------------------------------------------------

    async def _next(self) -> StreamEvent | None:
        if self._pushed:
            return self._pushed.pop()
        event = await anext(self._events, None)
        if event is not None:
            await self._trace(event)  # spans exactly as yield_turn derives them
        return event

    async def _peek(self) -> StreamEvent | None:
        event = await self._next()
        if event is not None:
            self._pushed.append(event)
        return event

    def _is_response(self, event: StreamEvent) -> bool:
        if isinstance(event, StreamTaskMessageStart | StreamTaskMessageFull):
            return isinstance(event.content, ToolResponseContent)
        if isinstance(event, StreamTaskMessageDelta):
            return isinstance(event.delta, ToolResponseDelta)
        return event.index in self._responding

    # --- messages and tool responses ----------------------------------------------------

    async def _message(self) -> None:
        # The framework's own request is not ours to see; the hash pins the message's place.
        request = ModelRequest(
            model=self._model, messages=(), settings={"tapMessage": self._messages}
        )
        response = await self._journal.model(request, client=_Reader(self))
        self._messages += 1
        self._usage_landed |= _billed(response.usage, response.cost)
        texts = [part.text for part in response.message.parts if isinstance(part, TextPart)]
        if texts:
            self.final_text = texts[-1]  # the last text segment is the answer

    async def read_message(self, stream: DeltaSink | None) -> ModelResponse:
        """Pull one assistant message off the source: up to a tool response or the end. The
        message that reads to the end carries the turn's usage and cost (valid only then),
        where the usage ledger and the budgets count a completion's."""
        order: list[_Slot] = []
        open_slots: dict[int, _Slot] = {}
        usage: Usage | None = None
        cost: float | None = None
        while True:
            event = await self._next()
            if event is None:
                usage, cost = _spent(self._usage())
                break
            if self._is_response(event):
                self._pushed.append(event)
                break
            if isinstance(event, StreamTaskMessageStart | StreamTaskMessageFull):
                slot = _Slot(event.content)
                order.append(slot)
                if isinstance(event, StreamTaskMessageStart) and event.index is not None:
                    open_slots[event.index] = slot
                await _stream_initial(event.content, stream)
            elif isinstance(event, StreamTaskMessageDelta) and event.index in open_slots:
                await _apply(open_slots[event.index], event, stream)
            elif isinstance(event, StreamTaskMessageDone) and event.index is not None:
                open_slots.pop(event.index, None)
        parts = tuple(slot.part() for slot in order)
        message = Message(role="assistant", parts=parts)
        return ModelResponse(message=message, usage=usage, cost=cost)

    async def _tool_responses(self) -> None:
        """Report each tool response (a Full, or Start + deltas + Done) until something else."""
        while (event := await self._next()) is not None:
            if isinstance(event, StreamTaskMessageFull) and isinstance(
                event.content, ToolResponseContent
            ):
                await self._journal.report(_Slot(event.content).result())
            elif isinstance(event, StreamTaskMessageStart) and isinstance(
                event.content, ToolResponseContent
            ):
                if event.index is not None:
                    self._responding[event.index] = _Slot(event.content)
            elif isinstance(event, StreamTaskMessageDelta) and isinstance(
                event.delta, ToolResponseDelta
            ):
                slot = self._responding.get(event.index) if event.index is not None else None
                if slot is not None:
                    slot.text += event.delta.content_delta or ""
            elif isinstance(event, StreamTaskMessageDone) and event.index in self._responding:
                await self._journal.report(self._responding.pop(event.index).result())
            else:
                self._pushed.append(event)
                return

    async def _close(self, usage: Callable[[], TurnUsage]) -> TurnUsage:
        async def read() -> JsonValue:
            while await self._next() is not None:  # usage is valid once events are exhausted
                pass
            for slot in self._responding.values():  # responses the source never closed
                await self._journal.report(slot.result())
            return usage().model_dump(mode="json")

        return TurnUsage.model_validate(await self._journal.step(USAGE_STEP, read))


def _spent(usage: TurnUsage) -> tuple[Usage | None, float | None]:
    """A turn's usage as a completion's: its tokens (``None`` if it reported none) and cost."""
    tokens = Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        cache_read_tokens=usage.cached_input_tokens,
    )
    return (None if tokens == Usage() else tokens), usage.cost_usd


def _billed(usage: Usage | None, cost: float | None) -> bool:
    return usage is not None or cost is not None


async def _stream_initial(content: MessageContent, stream: DeltaSink | None) -> None:
    """Initial text and reasoning stream as the message's first chunk."""
    if stream is None:
        return
    if isinstance(content, TextContent) and content.content:
        await stream(StreamDelta("text", content.content))
    elif isinstance(content, ReasoningContent):
        text = "".join([*content.summary, *(content.content or ())])
        if text:
            await stream(StreamDelta("thinking", text))


async def _apply(slot: _Slot, event: StreamTaskMessageDelta, stream: DeltaSink | None) -> None:
    delta = event.delta
    if isinstance(delta, ToolRequestDelta):
        slot.text += delta.arguments_delta or ""
        return
    if isinstance(delta, TextDelta):
        chunk = StreamDelta("text", delta.text_delta or "")
    elif isinstance(delta, ReasoningContentDelta):
        chunk = StreamDelta("thinking", delta.content_delta or "")
    elif isinstance(delta, ReasoningSummaryDelta):
        chunk = StreamDelta("thinking", delta.summary_delta or "", summary=True)
    else:
        return
    slot.text += chunk.text
    if chunk.text and stream is not None:
        await stream(chunk)


class _Reader:
    """The 'model' of an auto-sent message: it reads the message off the framework stream."""

    def __init__(self, sender: AutoSend) -> None:
        self._sender = sender

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        return await self._sender.read_message(stream)
