"""LangGraphTurn: the tap's events, and usage summed over the turn's AI messages."""

from datetime import date
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langgraph.config import get_stream_writer
from langgraph.graph import START, StateGraph, add_messages

from tether.integrations.langgraph import LangGraphTurn, convert_langgraph_events, langgraph_usage
from tether.stream import (
    DataContent,
    HarnessTurn,
    StreamTaskMessageFull,
    TurnUsage,
    UnifiedEmitter,
)

from .test_langgraph_sync import Source, calling, chunk, update


def ai(msg_id: str, usage: UsageMetadata | None, **kwargs: Any) -> AIMessage:
    return AIMessage(content="x", id=msg_id, usage_metadata=usage, **kwargs)


FULL: UsageMetadata = {
    "input_tokens": 100,
    "output_tokens": 20,
    "total_tokens": 120,
    "input_token_details": {"cache_read": 60},
    "output_token_details": {"reasoning": 7},
}


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            FULL,
            TurnUsage(
                input_tokens=100,
                output_tokens=20,
                total_tokens=120,
                cached_input_tokens=60,
                reasoning_tokens=7,
                num_llm_calls=1,
            ),
        ),
        (
            {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
            TurnUsage(input_tokens=0, output_tokens=0, total_tokens=0, num_llm_calls=1),
        ),
        (None, TurnUsage(num_llm_calls=1)),
    ],
)
def test_usage_mapping(usage: UsageMetadata | None, expected: TurnUsage) -> None:
    assert langgraph_usage([ai("m", usage)]) == expected


def test_usage_accumulates_and_none_stays_none() -> None:
    small: UsageMetadata = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    usage = langgraph_usage(
        [ai("a", FULL), ai("b", None), ai("c", small, response_metadata={"model_name": "m-1"})]
    )
    assert usage == TurnUsage(
        model="m-1",
        input_tokens=101,
        output_tokens=22,
        total_tokens=123,
        cached_input_tokens=60,
        reasoning_tokens=7,
        num_llm_calls=3,
    )
    assert langgraph_usage([ai("a", small)], model="given").model == "given"
    assert langgraph_usage([]) == TurnUsage(num_llm_calls=0)


def items() -> list[tuple[str, Any]]:
    first = calling(("c1", "t", {}), msg_id="m1")
    first.usage_metadata = FULL
    reasoning = [{"type": "reasoning", "reasoning": "hmm"}]
    return [
        update("agent", first),
        update("tools", ToolMessage(content="r", tool_call_id="c1", name="t")),
        chunk(reasoning, id="m2"),
        chunk("done", id="m2"),
        update("agent", ai("m2", {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6})),
        update("agent", ai("m2", FULL)),  # the same message again: counted once
    ]


async def test_the_turn_yields_the_bare_converters_events_and_sums_usage() -> None:
    turn = LangGraphTurn(Source(items()), model="gpt-x")
    assert isinstance(turn, HarnessTurn)
    assert turn.usage() == TurnUsage(model="gpt-x")  # before exhaustion: only the model
    events = [e async for e in UnifiedEmitter().yield_turn(turn)]
    assert events == [e async for e in convert_langgraph_events(Source(items()))]
    assert turn.usage() == TurnUsage(
        model="gpt-x",
        input_tokens=105,
        output_tokens=21,
        total_tokens=126,
        cached_input_tokens=60,
        reasoning_tokens=7,
        num_llm_calls=2,
        num_tool_calls=1,
        num_reasoning_blocks=1,
    )


async def test_stopping_a_turn_early_closes_the_graph_stream() -> None:
    source = Source(items())
    stream = UnifiedEmitter().yield_turn(LangGraphTurn(source))
    async for _ in stream:
        break
    await stream.aclose()
    assert source.closed


class Counted(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    count: int


def counting(state: Counted) -> dict[str, Any]:
    get_stream_writer()({"progress": "half", "at": date(2026, 1, 2)})
    return {"messages": [AIMessage(content="counted", id="ai-1")], "count": state["count"] + 1}


async def test_updates_values_and_custom_modes_come_as_data_events() -> None:
    builder = StateGraph(Counted)
    builder.add_node("counting", counting)
    builder.add_edge(START, "counting")
    graph = builder.compile()
    source = graph.astream(
        {"messages": [HumanMessage(content="count", id="h-1")], "count": 1},
        stream_mode=["messages", "updates", "values", "custom"],
    )
    events = [e async for e in convert_langgraph_events(source)]
    data = [
        e.content.data
        for e in events
        if isinstance(e, StreamTaskMessageFull) and isinstance(e.content, DataContent)
    ]
    assert [d["kind"] for d in data] == [
        "langgraph_values",
        "langgraph_custom",
        "langgraph_update",
        "langgraph_values",
    ]
    assert data[1]["data"] == {"progress": "half", "at": "2026-01-02"}
    assert data[2] == {"kind": "langgraph_update", "node": "counting", "update": {"count": 2}}
    final = data[3]["values"]
    assert isinstance(final, dict) and final["count"] == 2
    messages = final["messages"]
    assert isinstance(messages, list)
    assert [m["content"] for m in messages if isinstance(m, dict)] == ["count", "counted"]
