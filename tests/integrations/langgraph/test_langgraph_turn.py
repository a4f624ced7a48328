"""LangGraphTurn: the tap's events, and usage summed over the turn's AI messages."""

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata

from tether.integrations.langgraph import LangGraphTurn, convert_langgraph_events, langgraph_usage
from tether.stream import HarnessTurn, TurnUsage, UnifiedEmitter

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
