"""The pydantic-ai tap: native events to the canonical stream (reference I.95-100, I.103)."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent
from pydantic_ai import messages as pa
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from tether.integrations.pydantic_ai import PydanticAITurn, pydantic_ai_events
from tether.stream import HarnessTurn, StreamEvent, UnifiedEmitter


async def source(*events: Any) -> AsyncIterator[Any]:
    for event in events:
        yield event


async def convert(*events: Any) -> list[dict[str, Any]]:
    return [dump(e) async for e in pydantic_ai_events(source(*events))]


def dump(event: StreamEvent) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)


async def test_text_starts_empty_and_delivers_initial_text_as_a_delta() -> None:
    assert await convert(
        pa.PartStartEvent(index=0, part=pa.TextPart("He")),
        pa.PartDeltaEvent(index=0, delta=pa.TextPartDelta("llo")),
        pa.PartEndEvent(index=0, part=pa.TextPart("Hello")),
    ) == [
        {
            "type": "start",
            "index": 0,
            "content": {
                "type": "text",
                "author": "agent",
                "content": "",
                "format": "plain",
                "style": "static",
            },
        },
        {"type": "delta", "index": 0, "delta": {"type": "text", "text_delta": "He"}},
        {"type": "delta", "index": 0, "delta": {"type": "text", "text_delta": "llo"}},
        {"type": "done", "index": 0},
    ]


async def test_thinking_opens_active_reasoning_and_skips_empty_deltas() -> None:
    events = await convert(
        pa.PartStartEvent(index=0, part=pa.ThinkingPart("t")),
        pa.PartDeltaEvent(index=0, delta=pa.ThinkingPartDelta(content_delta="")),
    )
    assert events == [
        {
            "type": "start",
            "index": 0,
            "content": {
                "type": "reasoning",
                "author": "agent",
                "summary": [],
                "content": [],
                "style": "active",
            },
        },
        {
            "type": "delta",
            "index": 0,
            "delta": {"type": "reasoning_content", "content_index": 0, "content_delta": "t"},
        },
    ]


async def test_tool_call_arguments_stream_as_request_deltas() -> None:
    events = await convert(
        pa.PartStartEvent(index=0, part=pa.ToolCallPart("calc", None, tool_call_id="c")),
        pa.PartDeltaEvent(index=0, delta=pa.ToolCallPartDelta(args_delta='{"a":')),
        pa.PartDeltaEvent(index=0, delta=pa.ToolCallPartDelta(args_delta={"b": 1})),
        pa.PartEndEvent(index=0, part=pa.ToolCallPart("calc", '{"a":1}', tool_call_id="c")),
    )
    assert events[0]["content"]["arguments"] == {}
    deltas = [e["delta"] for e in events[1:3]]
    assert deltas == [
        {"type": "tool_request", "tool_call_id": "c", "name": "calc", "arguments_delta": '{"a":'},
        {
            "type": "tool_request",
            "tool_call_id": "c",
            "name": "calc",
            "arguments_delta": '{"b": 1}',
        },
    ]
    dict_args = await convert(
        pa.PartStartEvent(index=0, part=pa.ToolCallPart("calc", {"a": 1}, tool_call_id="c"))
    )
    assert dict_args[0]["content"]["arguments"] == {"a": 1} and len(dict_args) == 1
    str_args = await convert(
        pa.PartStartEvent(index=0, part=pa.ToolCallPart("calc", '{"a":1}', tool_call_id="c"))
    )
    assert str_args[1]["delta"]["arguments_delta"] == '{"a":1}'


async def test_tool_results_are_fulls_with_is_error_when_the_call_failed() -> None:
    ok = pa.ToolReturnPart("calc", {"sum": 3}, tool_call_id="c")
    retried = pa.ToolReturnPart("calc", "bad input", tool_call_id="d", outcome="retried")
    events = await convert(
        pa.FunctionToolResultEvent(part=ok), pa.FunctionToolResultEvent(part=retried)
    )
    assert [e["type"] for e in events] == ["full", "full"]
    assert events[0]["content"]["content"] == {"sum": 3}
    assert "is_error" not in events[0]["content"]
    assert events[1]["content"]["is_error"] is True
    assert "bad input" in events[1]["content"]["content"]


async def test_indices_are_never_reused_across_model_responses() -> None:
    events = await convert(
        pa.PartStartEvent(index=0, part=pa.TextPart("a")),
        pa.PartEndEvent(index=0, part=pa.TextPart("a")),
        pa.PartStartEvent(index=1, part=pa.ToolCallPart("t", {}, tool_call_id="c")),
        pa.PartEndEvent(index=1, part=pa.ToolCallPart("t", {}, tool_call_id="c")),
        pa.FunctionToolResultEvent(part=pa.ToolReturnPart("t", "ok", tool_call_id="c")),
        pa.PartStartEvent(index=0, part=pa.TextPart("b")),  # a new response restarts at 0
        pa.PartDeltaEvent(index=0, delta=pa.TextPartDelta("c")),
        pa.PartDeltaEvent(index=7, delta=pa.TextPartDelta("lost")),  # unknown part: skipped
        pa.PartEndEvent(index=0, part=pa.TextPart("bc")),
    )
    starts = [e["index"] for e in events if e["type"] in ("start", "full")]
    assert starts == [0, 1, 2, 3]
    assert [e["index"] for e in events if e["type"] == "done"] == [0, 1, 3]


def streaming_model() -> FunctionModel:
    async def stream(messages: list[pa.ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if any(isinstance(p, pa.ToolReturnPart) for p in messages[-1].parts):
            yield "the sum "
            yield "is 3"
        else:
            yield {0: DeltaToolCall(name="add", json_args='{"a": 1, "b": 2}', tool_call_id="c1")}

    return FunctionModel(stream_function=stream, model_name="streamer")


def adding_agent() -> Agent[None, str]:
    agent = Agent(streaming_model())

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


async def test_a_real_run_streams_and_reports_usage_after_exhaustion() -> None:
    turn = PydanticAITurn(adding_agent().run_stream_events("add 1 and 2"), model="streamer")
    assert isinstance(turn, HarnessTurn)
    assert turn.usage().num_llm_calls is None  # not reported before exhaustion
    events = [dump(e) async for e in UnifiedEmitter().yield_turn(turn)]
    contents = [e["content"]["type"] for e in events if e["type"] in ("start", "full")]
    assert contents == ["tool_request", "tool_response", "text"]
    response = next(e for e in events if e["type"] == "full")["content"]
    assert response["content"] == 3 and response["tool_call_id"] == "c1"
    text = "".join(
        e["delta"]["text_delta"]
        for e in events
        if e["type"] == "delta" and "text_delta" in e["delta"]
    )
    assert text == "the sum is 3"
    usage = turn.usage()
    assert usage.model == "streamer" and usage.num_llm_calls == 2 and usage.num_tool_calls == 1
    assert usage.input_tokens is not None and usage.output_tokens is not None


async def test_yield_turn_equals_the_bare_converter() -> None:
    bare = [dump(e) async for e in pydantic_ai_events(adding_agent().run_stream_events("x"))]
    turn = PydanticAITurn(adding_agent().run_stream_events("x"))
    assert [dump(e) async for e in UnifiedEmitter().yield_turn(turn)] == bare


async def test_result_callback_runs_once_sync_or_async() -> None:
    seen: list[str] = []

    async def on_result(event: Any) -> None:
        await asyncio.sleep(0)  # a callback that really awaits: it must be awaited once
        seen.append(event.result.output)

    async for _ in pydantic_ai_events(adding_agent().run_stream_events("x"), on_result):
        pass
    assert seen == ["the sum is 3"]


async def test_a_consumer_that_stops_early_closes_the_source() -> None:
    closed: list[bool] = []

    async def endless() -> AsyncIterator[Any]:
        try:
            while True:
                yield pa.PartStartEvent(index=0, part=pa.TextPart("x"))
        finally:
            closed.append(True)

    events = pydantic_ai_events(endless())
    async for _ in events:
        break
    await events.aclose()
    assert closed == [True]
