"""The codex tap over streams captured from the real CLI (fixtures/README.md), and over one
written from the documented schema: messages, reasoning, commands, file changes, MCP and
web-search calls, usage, warnings, errors and interrupted runs."""

import json
from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from tether.integrations.codex import CodexTurn, codex_usage, convert_codex_events
from tether.stream import (
    CloseSpan,
    OpenSpan,
    ReasoningContent,
    ReasoningSummaryDelta,
    SpanSignal,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageStart,
    UnifiedEmitter,
)

from ..claude_code.support import CODEX_FIXTURES, check_slots, collect, lines, logical

pytestmark = pytest.mark.timeout(30)


async def tapped(name: str) -> tuple[list[StreamEvent], CodexTurn]:
    turn = CodexTurn(lines(CODEX_FIXTURES / f"{name}.jsonl"), model="gpt-5.5")
    events = await collect(turn.events)
    check_slots(events)
    return events, turn


async def test_reasoning_and_a_message_with_the_turns_usage() -> None:
    events, turn = await tapped("text")
    assert logical(events) == [
        ("reasoning", "**Greeting**\n\nThe user wants a short hello."),
        ("text", "Hello! How can I help?"),
    ]
    # A reasoning item that only completes comes as agentex's tap sends it, Start, Delta,
    # Done (so a reasoning span comes out), its text a summary, as Codex says.
    assert [e.type for e in events] == ["start", "delta", "done", "full"]
    start, delta = events[0], events[1]
    assert isinstance(start, StreamTaskMessageStart) and isinstance(start.content, ReasoningContent)
    assert isinstance(delta, StreamTaskMessageDelta)
    assert isinstance(delta.delta, ReasoningSummaryDelta)
    usage = turn.usage()
    assert (usage.model, usage.input_tokens, usage.cached_input_tokens) == ("gpt-5.5", 2400, 1024)
    assert (usage.output_tokens, usage.reasoning_tokens, usage.total_tokens) == (60, 20, 2460)
    assert usage.cost_usd is None  # Codex reports none
    assert (usage.num_tool_calls, usage.num_reasoning_blocks) == (0, 1)
    assert turn.failure is None and turn.thread_id == "01a235b4-9e2f-7791-aeb8-b8a58ba505d0"


async def test_a_command_it_ran() -> None:
    events, turn = await tapped("command")
    assert logical(events) == [
        ("reasoning", "**Running a command**\n\nI will echo to check the shell."),
        (
            "request",
            "command_execution",
            "item_1",
            {"command": "/bin/bash -lc 'echo hello from codex'"},
        ),
        (
            "response",
            "command_execution",
            "item_1",
            {"output": "hello from codex\n", "exit_code": 0, "status": "completed"},
            False,
        ),
        ("text", "The command printed: hello from codex"),
    ]
    assert turn.usage().input_tokens == 4801  # both model calls of the turn
    assert turn.usage().num_tool_calls == 1


async def test_a_failing_command_is_an_error_response() -> None:
    events, _ = await tapped("failing")
    (response,) = [s for s in logical(events) if s[0] == "response"]
    assert response[3]["exit_code"] == 2 and response[3]["status"] == "failed"
    assert "No such file or directory" in response[3]["output"] and response[4] is True


async def test_a_patch_is_a_file_change_call() -> None:
    events, _ = await tapped("patch")
    request, response, text = logical(events)
    assert request[:3] == ("request", "file_change", "item_0")
    (change,) = request[3]["changes"]
    assert change["kind"] == "add" and change["path"].endswith("/project/notes.txt")
    assert response[3]["status"] == "completed" and response[4] is False
    assert text == ("text", "I created notes.txt.")


async def test_an_mcp_call_and_a_web_search() -> None:
    events, _ = await tapped("mcp")
    assert logical(events) == [
        ("request", "mcp__clock__now", "item_0", {"tz": "UTC"}),
        ("response", "mcp__clock__now", "item_0", "12:00 UTC", False),
        ("text", "It is 12:00 UTC."),
    ]
    events, turn = await tapped("web_search")
    said = logical(events)
    search = {
        "query": "durable agent sessions",
        "action": {"type": "search", "query": "durable agent sessions"},
    }
    # The CLI writes the item's "id" twice; the last one is the call's id, both times.
    assert said[0] == ("request", "web_search", "ts_fake00", search)
    assert said[1][:3] == ("response", "web_search", "ts_fake00") and said[1][4] is False
    assert turn.usage().num_tool_calls == 1


async def test_a_warning_item_is_kept_and_not_shown() -> None:
    events, turn = await tapped("warning")
    assert logical(events) == [("text", "Hello!")]
    assert len(turn.warnings) == 1 and "Model metadata for `gpt-5.1-codex`" in turn.warnings[0]
    assert turn.failure is None


async def test_an_api_error_shows_once_and_fails_the_run() -> None:
    events, turn = await tapped("api_error")
    assert logical(events) == [("text", "fake: the model is not available")]
    assert turn.failure == "fake: the model is not available"
    assert turn.usage().input_tokens is None


async def test_an_interrupted_run_fails() -> None:
    events, turn = await tapped("interrupted")
    assert events == []
    assert turn.failure == "the run ended before turn.completed (interrupted?)"
    assert turn.thread_id is not None


async def test_a_resumed_thread_reports_the_threads_running_total() -> None:
    _, first = await tapped("text")
    _, resumed = await tapped("resumed")
    assert resumed.usage().input_tokens == 4801  # 2400 from the first run + 2401 from this one
    assert first.usage().input_tokens == 2400


async def test_the_documented_items() -> None:
    events, turn = await tapped("documented")
    said = logical(events)
    assert said[0] == ("reasoning", "**Planning**\n\nFirst a plan, then the fix.")
    kinds = [e.type for e in events if e.index == 0]
    assert kinds == ["start", "delta", "delta", "done"]  # item.updated streams the growth
    assert said[1] == (
        "request",
        "todo_list",
        "item_1",
        {
            "items": [
                {"text": "Read the code", "completed": False},
                {"text": "Fix the bug", "completed": False},
            ]
        },
    )
    responses = {s[2]: s for s in said if s[0] == "response"}
    assert responses["item_1"][3] == {
        "items": [
            {"text": "Read the code", "completed": True},
            {"text": "Fix the bug", "completed": True},
        ]
    }
    assert responses["item_2"][4] is True  # declined
    assert responses["item_3"][4] is False  # a file change with no item.started
    assert responses["item_4"][1:] == (
        "mcp__docs__search",
        "item_4",
        "the docs server is down",
        True,
    )
    assert responses["item_5"][1] == "spawn_agent" and responses["item_5"][4] is False
    requests = {s[2]: s for s in said if s[0] == "request"}
    assert requests["item_5"][3] == {
        "sender_thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53",
        "receiver_thread_ids": [],
        "prompt": "Write the tests",
    }
    assert said[-1] == ("text", "Fixed the bug in src/app.py.")
    text = [
        e.delta.text_delta
        for e in events
        if e.type == "delta" and e.delta is not None and e.delta.type == "text"
    ]
    assert text == ["Fixed the", " bug", " in src/app.py."]
    usage = turn.usage()
    assert (usage.num_tool_calls, usage.num_reasoning_blocks, usage.reasoning_tokens) == (
        5,
        1,
        None,
    )


async def test_a_rewritten_message_and_a_cut_stream() -> None:
    events = [
        {"type": "item.started", "item": {"id": "a", "type": "agent_message", "text": "Hel"}},
        {
            "type": "item.updated",
            "item": {"id": "a", "type": "agent_message", "text": "Yo"},
        },  # not a growth
        {"type": "item.started", "item": {"id": "b", "type": "reasoning", "text": ""}},
        {"type": "item.started", "item": {"id": "c", "type": "image_view", "path": "x.png"}},
    ]
    turn = CodexTurn(events)
    converted = await collect(turn.events)
    check_slots(converted)  # what the cut left open is closed
    assert logical(converted) == [
        ("text", "Hel"),
        ("reasoning", ""),
        ("request", "image_view", "c", {"path": "x.png"}),
    ]
    assert turn.failure == "the run ended before turn.completed (interrupted?)"


def test_usage_of_a_turn_that_reported_none() -> None:
    usage = codex_usage(None, model="m")
    assert usage.input_tokens is None and usage.total_tokens is None and usage.model == "m"


@pytest.mark.parametrize("form", ["dicts", "bytes", "async", "file"])
async def test_a_captured_run_in_any_form(form: str) -> None:
    text = lines(CODEX_FIXTURES / "command.jsonl")
    expected = logical((await tapped("command"))[0])
    if form == "file":
        with (CODEX_FIXTURES / "command.jsonl").open("rb") as captured:
            assert logical(await collect(convert_codex_events(captured))) == expected
        return
    if form == "dicts":
        source: object = [json.loads(line) for line in text]
    elif form == "bytes":
        source = [line.encode() for line in text]
    else:

        async def stream() -> AsyncIterator[str]:
            for line in text:
                yield line

        source = stream()
    assert logical(await collect(convert_codex_events(source))) == expected  # type: ignore[arg-type]


async def test_a_consumer_that_stops_early_closes_the_source() -> None:
    closed = []

    async def source() -> AsyncIterator[str]:
        try:
            for line in lines(CODEX_FIXTURES / "command.jsonl"):
                yield line
        finally:
            closed.append(True)

    async with aclosing(UnifiedEmitter().yield_turn(CodexTurn(source()))) as events:
        async for _ in events:
            break
    assert closed == [True]


async def test_a_completed_reasoning_item_is_a_reasoning_span() -> None:
    signals: list[SpanSignal] = []
    turn = CodexTurn(lines(CODEX_FIXTURES / "text.jsonl"))
    async for _ in UnifiedEmitter(tracer=signals.append).yield_turn(turn):
        pass
    opened, closed = signals
    assert isinstance(opened, OpenSpan) and opened.kind == "reasoning"
    assert isinstance(closed, CloseSpan) and closed.is_complete
    assert closed.output == "**Greeting**\n\nThe user wants a short hello."


async def test_spans_for_the_command() -> None:
    signals: list[SpanSignal] = []
    turn = CodexTurn(lines(CODEX_FIXTURES / "failing.jsonl"))
    async for _ in UnifiedEmitter(tracer=signals.append).yield_turn(turn):
        pass
    opened, closed = [s for s in signals if s.key == "item_0"]
    assert isinstance(opened, OpenSpan) and opened.name == "command_execution"
    assert isinstance(closed, CloseSpan) and closed.is_error is True
