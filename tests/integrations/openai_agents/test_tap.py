"""The OpenAI Agents tap: real ``Runner.run_streamed`` runs over a scripted offline model."""

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import (
    Agent,
    RawResponsesStreamEvent,
    RunConfig,
    RunItemStreamEvent,
    Runner,
    function_tool,
)
from agents.items import ToolCallOutputItem, TResponseOutputItem
from openai.types.responses import ResponseOutputItemDoneEvent

from tether.integrations.openai_agents import OpenAIAgentsTurn, convert_openai_agents_events
from tether.stream import (
    HarnessTurn,
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
    UnifiedEmitter,
    parse_tool_arguments,
)

from .scripted import ScriptedModel, call, reasoning, text

NO_TRACING = RunConfig(tracing_disabled=True)


def rule(items: list[dict[str, Any]]) -> list[TResponseOutputItem]:
    if items[-1].get("type") == "function_call_output":
        return [text(f"done: {items[-1]['output']}", "msg_2")]
    return [reasoning("think", "deep"), text("on it"), call("get_weather", '{"city":"Oslo"}', "c1")]


def agent() -> Agent[Any]:
    @function_tool
    def get_weather(city: str) -> str:
        """The weather."""
        return f"sunny in {city}"

    return Agent(name="w", instructions="hi", model=ScriptedModel(rule), tools=[get_weather])


def start(index: int, content: Any) -> StreamEvent:
    return StreamTaskMessageStart(index=index, content=content)


def delta(index: int, value: Any) -> StreamEvent:
    return StreamTaskMessageDelta(index=index, delta=value)


def done(index: int) -> StreamEvent:
    return StreamTaskMessageDone(index=index)


EXPECTED: list[StreamEvent] = [
    start(0, ReasoningContent(author="agent", summary=[], content=[], style="active")),
    delta(0, ReasoningSummaryDelta(summary_index=0, summary_delta="think")),
    delta(0, ReasoningContentDelta(content_index=0, content_delta="deep")),
    done(0),
    start(1, TextContent(author="agent", content="")),
    delta(1, TextDelta(text_delta="on")),
    delta(1, TextDelta(text_delta=" it")),
    done(1),
    start(
        2, ToolRequestContent(author="agent", name="get_weather", tool_call_id="c1", arguments={})
    ),
    delta(2, ToolRequestDelta(tool_call_id="c1", name="get_weather", arguments_delta='{"city"')),
    delta(2, ToolRequestDelta(tool_call_id="c1", name="get_weather", arguments_delta=':"Oslo"}')),
    done(2),
    StreamTaskMessageFull(
        index=3,
        content=ToolResponseContent(
            author="agent", name="get_weather", tool_call_id="c1", content="sunny in Oslo"
        ),
    ),
    start(4, TextContent(author="agent", content="")),
    delta(4, TextDelta(text_delta="done: sun")),
    delta(4, TextDelta(text_delta="ny in Oslo")),
    done(4),
]


async def test_a_streamed_run_maps_to_the_canonical_stream_with_fresh_indices() -> None:
    turn = OpenAIAgentsTurn(Runner.run_streamed(agent(), "weather", run_config=NO_TRACING))
    assert isinstance(turn, HarnessTurn)
    assert [event async for event in turn.events] == EXPECTED


async def test_usage_is_read_after_exhaustion() -> None:
    turn = OpenAIAgentsTurn(Runner.run_streamed(agent(), "x", run_config=NO_TRACING), model="m")
    assert turn.usage() == TurnUsage(model="m")
    events = [event async for event in UnifiedEmitter().yield_turn(turn)]
    assert events == EXPECTED  # the emitter passes the tap's events through unchanged
    assert turn.usage() == TurnUsage(
        model="m",
        input_tokens=20,
        output_tokens=10,
        total_tokens=30,
        cached_input_tokens=4,
        reasoning_tokens=2,
        num_llm_calls=2,
        num_tool_calls=1,
        num_reasoning_blocks=1,
    )


async def test_a_consumer_that_stops_early_closes_the_source_and_cancels_the_run() -> None:
    result = Runner.run_streamed(agent(), "x", run_config=NO_TRACING)
    turn = OpenAIAgentsTurn(result)
    events = turn.events
    async for _ in events:
        break
    await events.aclose()
    assert result.is_complete


class Source:
    """A bare event source that records whether it was closed."""

    def __init__(self, events: list[Any]) -> None:
        self.events = iter(events)
        self.closed = False

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        try:
            return next(self.events)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self.closed = True


def item_done(item: TResponseOutputItem, output_index: int = 0) -> RawResponsesStreamEvent:
    return RawResponsesStreamEvent(
        data=ResponseOutputItemDoneEvent(
            type="response.output_item.done",
            item=item,
            output_index=output_index,
            sequence_number=output_index,
        )
    )


def tool_output(call_id: str, status: str | None) -> RunItemStreamEvent:
    raw: dict[str, Any] = {"type": "function_call_output", "call_id": call_id, "output": "x"}
    if status is not None:
        raw["status"] = status
    item = ToolCallOutputItem(agent=Agent(name="a"), raw_item=raw, output={"n": 1})
    return RunItemStreamEvent(name="tool_output", item=item)


async def test_whole_items_without_deltas_become_full_messages() -> None:
    source = Source(
        [
            item_done(text("hello")),
            item_done(call("f", "not json", "c9"), 1),
            tool_output("c9", "failed"),
            tool_output("c10", "completed"),
            tool_output("c11", None),
        ]
    )
    events = [event async for event in convert_openai_agents_events(source)]
    assert source.closed
    assert events[:2] == [
        StreamTaskMessageFull(index=0, content=TextContent(author="agent", content="hello")),
        StreamTaskMessageFull(
            index=1,
            content=ToolRequestContent(
                author="agent", name="f", tool_call_id="c9", arguments={"raw": "not json"}
            ),
        ),
    ]
    responses = [e.content for e in events[2:] if isinstance(e, StreamTaskMessageFull)]
    assert [(r.name, r.content, r.is_error) for r in responses] == [  # type: ignore[union-attr]
        ("f", {"n": 1}, True),
        ("", {"n": 1}, False),
        ("", {"n": 1}, None),
    ]
    assert [e.index for e in events] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2]", {"value": [1, 2]}),
        ("3", {"value": 3}),
        ("{oops", {"raw": "{oops"}),
        ("", {}),
    ],
)
def test_tool_arguments_always_parse_to_an_object(raw: str, parsed: dict[str, Any]) -> None:
    assert parse_tool_arguments(raw) == parsed
    assert json.dumps(parsed)  # JSON all the way
