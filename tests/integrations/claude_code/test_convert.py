"""The claude-code tap over streams captured from the real CLI (fixtures/README.md): text,
thinking, tool calls and results, partial messages, usage and cost, errors and interrupted
runs, and the inputs a captured run comes as."""

import json
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether.integrations.claude_code import (
    ClaudeCodeTurn,
    claude_code_usage,
    convert_claude_code_events,
)
from tether.otel import OtelSpanSink
from tether.stream import CloseSpan, OpenSpan, SpanSignal, StreamEvent, UnifiedEmitter

from .support import CLAUDE_FIXTURES, check_slots, collect, lines, logical

pytestmark = pytest.mark.timeout(30)

BASH = {"command": "echo hello from bash", "description": "Print a greeting"}
TOOL_RUN = [
    ("reasoning", "I should run echo to check the shell."),
    ("text", "I'll run the command."),
    ("request", "Bash", "toolu_fake012", BASH),
    ("response", "Bash", "toolu_fake012", "hello from bash", False),
    ("text", "The command printed: hello from bash"),
]


async def tapped(name: str) -> tuple[list[StreamEvent], ClaudeCodeTurn]:
    turn = ClaudeCodeTurn(lines(CLAUDE_FIXTURES / f"{name}.jsonl"), model="claude-sonnet-4-5")
    events = await collect(turn.events)
    check_slots(events)
    return events, turn


async def test_text_and_thinking_with_the_runs_usage_and_cost() -> None:
    events, turn = await tapped("text")
    assert logical(events) == [
        ("reasoning", "The user wants a greeting. Keep it short."),
        ("text", "Hello! How can I help?"),
    ]
    # Thinking as agentex's tap sends it (Start, Delta, Done), so a reasoning span comes out.
    assert [e.type for e in events] == ["start", "delta", "done", "full"]
    usage = turn.usage()
    assert usage.model == "claude-sonnet-4-5"
    # 1201 fresh + 300 written to the cache + 5000 read from it, as the fake reported
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (6501, 5000, 41)
    assert usage.total_tokens == 6542 and usage.reasoning_tokens == 0
    assert usage.cost_usd == pytest.approx(0.006843)  # the CLI's own price for those tokens
    assert usage.duration_ms is not None and usage.duration_ms > 0
    assert (usage.num_llm_calls, usage.num_tool_calls, usage.num_reasoning_blocks) == (1, 0, 1)
    assert turn.failure is None
    assert turn.init is not None and turn.init["model"] == "claude-sonnet-4-5"
    assert turn.session_id == turn.init["session_id"]


async def test_a_tool_call_and_its_result() -> None:
    events, turn = await tapped("tool")
    assert logical(events) == TOOL_RUN
    usage = turn.usage()
    assert (usage.num_llm_calls, usage.num_tool_calls, usage.num_reasoning_blocks) == (2, 1, 1)
    assert usage.input_tokens == (1201 + 1202) + 2 * 300 + 2 * 5000  # summed over both calls
    assert turn.result is not None and turn.result["num_turns"] == 2


async def test_partial_messages_stream_the_same_run_incrementally() -> None:
    events, turn = await tapped("partial")
    assert logical(events) == TOOL_RUN  # the whole assistant events are not sent again
    assert [(e.type, e.index) for e in events if e.index == 2][:2] == [
        ("start", 2),
        ("delta", 2),
    ]
    arguments = [
        e.delta.arguments_delta
        for e in events
        if e.type == "delta" and e.delta is not None and e.delta.type == "tool_request"
    ]
    assert len(arguments) > 1 and json.loads("".join(a or "" for a in arguments)) == BASH
    whole = (await tapped("tool"))[1].usage()
    assert turn.usage().model_dump(exclude={"duration_ms"}) == whole.model_dump(
        exclude={"duration_ms"}
    )


async def test_a_failed_command_and_a_denied_tool_are_error_results() -> None:
    events, turn = await tapped("tool_error")
    (response,) = [s for s in logical(events) if s[0] == "response"]
    assert response[3].startswith("Exit code 2\nls: cannot access 'missing.txt'")
    assert response[4] is True
    assert turn.failure is None  # the run went on: the model read the error
    events, turn = await tapped("denied")
    (response,) = [s for s in logical(events) if s[0] == "response"]
    assert response[1] == "Write" and response[4] is True
    assert "requested permissions to write" in response[3]
    assert turn.result is not None and turn.result["permission_denials"]


async def test_max_turns_ends_with_the_error_as_text_and_a_failure() -> None:
    events, turn = await tapped("max_turns")
    assert logical(events)[-1] == ("text", "error_max_turns: Reached maximum number of turns (1)")
    assert turn.failure == "error_max_turns: Reached maximum number of turns (1)"
    assert turn.usage().num_tool_calls == 1


async def test_an_api_error_shows_once_and_fails_the_run() -> None:
    events, turn = await tapped("api_error")
    assert logical(events) == [("text", "Invalid API key · Fix external API key")]
    assert turn.failure == "Invalid API key · Fix external API key"
    usage = turn.usage()
    assert usage.num_llm_calls is None  # the CLI's synthetic message is not a model call
    assert usage.cost_usd == 0.0 and usage.input_tokens == 0


async def test_an_interrupted_run_keeps_its_partial_text_and_says_why() -> None:
    events, turn = await tapped("interrupted")  # SIGINT mid-answer
    said = logical(events)
    assert said[0] == ("text", "Here is the first part of a long answer, and then")
    assert said[1][1].startswith("error_during_execution")
    assert turn.failure is not None and turn.failure.startswith("error_during_execution")
    assert turn.usage().num_llm_calls == 1


async def test_a_run_cut_before_its_result_closes_its_slots_and_fails() -> None:
    events, turn = await tapped("terminated")  # SIGTERM mid-answer: no result
    assert logical(events) == [("text", "Here is the first part of a long answer, and then")]
    assert events[-1].type == "done"
    assert turn.failure == "the run ended without a result event (interrupted?)"
    usage = turn.usage()
    assert usage.input_tokens is None and usage.cost_usd is None and usage.num_llm_calls == 1


async def test_a_background_subagent_and_the_second_result_it_wakes() -> None:
    events, turn = await tapped("subagent")
    said = logical(events)
    assert said[0][:3] == ("request", "Task", "toolu_fake010")
    assert said[1][0] == "response" and "Async agent launched" in said[1][3]
    assert ("text", "Hello from the subagent.") in said  # the subagent's own message
    usage = turn.usage()
    results = [json.loads(line) for line in lines(CLAUDE_FIXTURES / "subagent.jsonl")]
    results = [event for event in results if event["type"] == "result"]
    assert len(results) == 2
    assert usage.cost_usd == pytest.approx(results[-1]["total_cost_usd"])  # both wakes
    assert usage.output_tokens == sum(r["usage"]["output_tokens"] for r in results)
    assert usage.num_llm_calls == 4


async def test_a_resumed_session_costs_this_run_not_the_session() -> None:
    _, turn = await tapped("resumed")
    assert turn.result is not None
    session_total = turn.result["total_cost_usd"]
    assert turn.usage().cost_usd == pytest.approx(0.006861)
    assert session_total > turn.usage().cost_usd


async def test_usage_without_since_last_result_falls_back_to_total_cost() -> None:
    result = {"type": "result", "total_cost_usd": 0.5, "usage": {"input_tokens": 3}}
    usage = claude_code_usage([result], model="m", num_tool_calls=2)
    assert (usage.cost_usd, usage.input_tokens, usage.output_tokens) == (0.5, 3, None)
    assert usage.total_tokens is None and usage.num_tool_calls == 2
    assert claude_code_usage([]).model_dump(exclude_defaults=True) == {}


@pytest.mark.parametrize("form", ["dicts", "text", "bytes", "async"])
async def test_a_captured_run_in_any_form(form: str) -> None:
    text = lines(CLAUDE_FIXTURES / "tool.jsonl")
    source: Any
    if form == "dicts":
        source = [json.loads(line) for line in text]
    elif form == "bytes":
        source = [line.encode() + b"\n" for line in text]
    elif form == "async":

        async def stream() -> AsyncIterator[str]:
            for line in text:
                yield line

        source = stream()
    else:
        source = text
    assert logical(await collect(convert_claude_code_events(source))) == TOOL_RUN


async def test_an_open_file_converts_as_it_is() -> None:
    with (CLAUDE_FIXTURES / "tool.jsonl").open() as captured:
        assert logical(await collect(convert_claude_code_events(captured))) == TOOL_RUN


async def test_blank_and_garbage_lines_are_skipped_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = ["", "not json", "[1, 2]", *lines(CLAUDE_FIXTURES / "text.jsonl"), "  "]
    with caplog.at_level(logging.WARNING, "tether.integrations"):
        events = await collect(convert_claude_code_events(text))
    assert len(logical(events)) == 2
    assert [r.getMessage() for r in caplog.records] == [
        "claude-code tap: skipped a line that is not JSON: not json",
        "claude-code tap: skipped a JSON line that is not an object: [1, 2]",
    ]


async def test_a_consumer_that_stops_early_closes_the_source() -> None:
    closed = []

    async def source() -> AsyncIterator[str]:
        try:
            for line in lines(CLAUDE_FIXTURES / "tool.jsonl"):
                yield line
        finally:
            closed.append(True)

    async with aclosing(UnifiedEmitter().yield_turn(ClaudeCodeTurn(source()))) as events:
        async for _ in events:
            break
    assert closed == [True]


async def test_tool_results_with_blocks_and_server_tools() -> None:
    events: list[dict[str, Any]] = [
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "model": "claude-x",
                "content": [
                    {"type": "redacted_thinking", "data": "..."},
                    {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}},
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "s1",
                        "content": {"type": "web_search_tool_result_error", "error_code": "x"},
                    },
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}},
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {"type": "text", "text": "line 1"},
                            {"type": "image", "source": {"data": "..."}},
                        ],
                    }
                ],
            },
        },
        {"type": "user", "message": {"role": "user", "content": "a prompt"}},
        {"type": "system", "subtype": "status", "status": "requesting"},
        {"type": "keep_alive"},
    ]
    turn = ClaudeCodeTurn(events)
    assert logical(await collect(turn.events)) == [
        ("request", "web_search", "s1", {}),
        (
            "response",
            "web_search",
            "s1",
            {"type": "web_search_tool_result_error", "error_code": "x"},
            True,
        ),
        ("request", "Read", "t1", {"path": "a"}),
        ("response", "Read", "t1", "line 1\n[image]", False),
    ]
    usage = turn.usage()
    assert (usage.num_tool_calls, usage.num_reasoning_blocks, usage.num_llm_calls) == (2, 1, 1)


async def test_spans_for_the_tool_call_and_the_reasoning() -> None:
    for name in ("tool", "partial"):
        signals: list[SpanSignal] = []
        turn = ClaudeCodeTurn(lines(CLAUDE_FIXTURES / f"{name}.jsonl"))
        async for _ in UnifiedEmitter(tracer=signals.append).yield_turn(turn):
            pass
        tools = [s for s in signals if s.key == "toolu_fake012"]
        assert isinstance(tools[0], OpenSpan) and tools[0].input == BASH, name
        assert isinstance(tools[1], CloseSpan) and tools[1].output == "hello from bash", name
        assert tools[1].is_error is False
        # A thinking block is a reasoning span, streamed or whole.
        reasoning = [s for s in signals if s.key.startswith("reasoning:")]
        assert isinstance(reasoning[0], OpenSpan) and reasoning[0].kind == "reasoning", name
        assert isinstance(reasoning[-1], CloseSpan) and reasoning[-1].is_complete, name
        assert reasoning[-1].output == "I should run echo to check the shell.", name


async def test_the_otel_sink_makes_a_span_of_a_whole_thinking_block() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OtelSpanSink(provider.get_tracer("test"))
    turn = ClaudeCodeTurn(lines(CLAUDE_FIXTURES / "text.jsonl"))
    async for _ in UnifiedEmitter(tracer=sink).yield_turn(turn):
        pass
    [span] = exporter.get_finished_spans()
    assert span.name == "reasoning"
    assert dict(span.attributes or {})["tether.span.kind"] == "reasoning"


async def test_a_tool_result_is_cut_to_agentexs_4000_characters() -> None:
    output = "x" * 3999 + "é" + "tail past the limit"
    events = await collect(
        convert_claude_code_events(
            [
                {
                    "type": "assistant",
                    "message": {
                        "id": "m1",
                        "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
                    },
                },
                {
                    "type": "user",
                    "message": {
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}]
                    },
                },
            ]
        )
    )
    assert logical(events)[-1] == ("response", "Bash", "t1", "x" * 3999 + "é", False)
