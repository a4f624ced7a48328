"""Span derivation (reference J.104-108) and the turn types."""

from tether.messages import Mediation
from tether.records import ToolCalled, ToolOutcome
from tether.store import MemoryStore
from tether.stream import (
    CloseSpan,
    OpenSpan,
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    SpanDeriver,
    SpanSignal,
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
    TurnResult,
    TurnUsage,
    project,
)

from .test_project import log_of


def derive(events: list[StreamEvent], *, flush: bool = True) -> list[SpanSignal]:
    deriver = SpanDeriver()
    signals = [signal for event in events for signal in deriver.observe(event)]
    return signals + (deriver.flush() if flush else [])


def request(call: str = "c", name: str = "Bash") -> ToolRequestContent:
    return ToolRequestContent(author="agent", name=name, tool_call_id=call, arguments={})


def response(call: str = "c", is_error: bool | None = None) -> ToolResponseContent:
    return ToolResponseContent(
        author="agent", name="Bash", tool_call_id=call, content="ok", is_error=is_error
    )


def test_a_streamed_tool_call_opens_at_done_with_the_parsed_args() -> None:
    events: list[StreamEvent] = [
        StreamTaskMessageStart(content=request(), index=0),
        StreamTaskMessageDelta(
            delta=ToolRequestDelta(name="Bash", tool_call_id="c", arguments_delta='{"cmd":'),
            index=0,
        ),
        StreamTaskMessageDelta(
            delta=ToolRequestDelta(name="Bash", tool_call_id="c", arguments_delta='"ls"}'),
            index=0,
        ),
        StreamTaskMessageDone(index=0),
        StreamTaskMessageFull(content=response(is_error=True), index=1),
    ]
    assert derive(events) == [
        OpenSpan("c", "tool", "Bash", {"cmd": "ls"}),
        CloseSpan("c", "ok", is_complete=True, is_error=True),
    ]


def test_unparsable_streamed_args_are_kept_raw() -> None:
    events: list[StreamEvent] = [
        StreamTaskMessageStart(content=request(), index=0),
        StreamTaskMessageDelta(
            delta=ToolRequestDelta(name="Bash", tool_call_id="c", arguments_delta="{oops"), index=0
        ),
        StreamTaskMessageDone(index=0),
    ]
    assert derive(events, flush=False) == [OpenSpan("c", "tool", "Bash", {"_raw": "{oops"})]


def test_full_requests_open_once_and_responses_close() -> None:
    events: list[StreamEvent] = [
        StreamTaskMessageFull(content=request(), index=0),
        StreamTaskMessageFull(content=request(), index=1),
        StreamTaskMessageFull(content=response(), index=2),
    ]
    assert derive(events) == [OpenSpan("c", "tool", "Bash", {}), CloseSpan("c", "ok")]


def test_reasoning_spans_carry_their_text() -> None:
    events: list[StreamEvent] = [
        StreamTaskMessageStart(content=ReasoningContent(author="agent", summary=["s"]), index=3),
        StreamTaskMessageDelta(
            delta=ReasoningContentDelta(content_index=0, content_delta="x"), index=3
        ),
        StreamTaskMessageDelta(
            delta=ReasoningSummaryDelta(summary_index=0, summary_delta="y"), index=3
        ),
        StreamTaskMessageDone(index=3),
    ]
    assert derive(events) == [
        OpenSpan("reasoning:3", "reasoning", "reasoning"),
        CloseSpan("reasoning:3", "sxy"),
    ]


def test_what_makes_no_span() -> None:
    events: list[StreamEvent] = [
        StreamTaskMessageStart(content=request()),  # index None: skipped
        StreamTaskMessageFull(content=response("orphan"), index=0),
        StreamTaskMessageStart(content=TextContent(author="agent", content=""), index=1),
        StreamTaskMessageDelta(delta=TextDelta(text_delta="hi"), index=1),
        StreamTaskMessageDone(index=1),
    ]
    assert derive(events) == []


def test_flush_closes_tools_in_open_order_then_reasoning_by_index() -> None:
    events: list[StreamEvent] = [
        StreamTaskMessageStart(content=ReasoningContent(author="agent", summary=["b"]), index=5),
        StreamTaskMessageStart(content=ReasoningContent(author="agent", summary=["a"]), index=4),
        StreamTaskMessageFull(content=request("t2"), index=6),
        StreamTaskMessageFull(content=request("t1"), index=7),
    ]
    deriver = SpanDeriver()
    for event in events:
        deriver.observe(event)
    assert deriver.flush() == [
        CloseSpan("t2", None, is_complete=False),
        CloseSpan("t1", None, is_complete=False),
        CloseSpan("reasoning:4", "a", is_complete=False),
        CloseSpan("reasoning:5", "b", is_complete=False),
    ]
    assert deriver.flush() == []


async def test_a_journaled_tool_call_derives_one_span() -> None:
    store = MemoryStore()
    cid = await log_of(
        store,
        [
            ToolCalled(
                call_id="t",
                tool="clock",
                args={"tz": "UTC"},
                idempotency_key="k",
                mediation=Mediation.HOST,
            ),
            ToolOutcome(call_id="t", content="noon"),
        ],
    )
    assert derive(list(project(await store.read(cid)))) == [
        OpenSpan("t", "tool", "clock", {"tz": "UTC"}),
        CloseSpan("t", "noon", is_complete=True, is_error=False),
    ]


def test_usage_keeps_real_zeros_apart_from_not_reported() -> None:
    zeros = TurnUsage(input_tokens=0, output_tokens=0, num_llm_calls=0)
    assert zeros.input_tokens == 0 and zeros.num_llm_calls == 0
    assert TurnUsage().input_tokens is None and TurnUsage().num_tool_calls == 0
    assert TurnResult().final_text == "" and TurnResult().usage == TurnUsage()
