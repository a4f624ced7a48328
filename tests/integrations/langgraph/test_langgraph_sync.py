"""The LangGraph tap (reference §2.3, I.101, I.103): ``(mode, data)`` tuples to canonical events."""

from collections.abc import AsyncIterator, Iterable
from typing import Any

from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from tether.integrations.langgraph import convert_langgraph_events
from tether.stream import (
    CloseSpan,
    OpenSpan,
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    SpanSignal,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageDone,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TextContent,
    TextDelta,
    ToolRequestContent,
    ToolResponseContent,
    UnifiedEmitter,
)

META: dict[str, Any] = {"langgraph_node": "agent"}
TEXT = TextContent(author="agent", content="")
REASONING = ReasoningContent(author="agent", summary=[], content=[], style="active")


class Source:
    """A stand-in for ``graph.astream``: yields the items, remembers being closed."""

    def __init__(self, items: Iterable[tuple[str, Any]]) -> None:
        self.items = list(items)
        self.closed = False

    def __aiter__(self) -> AsyncIterator[tuple[str, Any]]:
        return self

    async def __anext__(self) -> tuple[str, Any]:
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)

    async def aclose(self) -> None:
        self.closed = True


def chunk(content: Any, **kwargs: Any) -> tuple[str, Any]:
    return ("messages", (AIMessageChunk(content=content, **kwargs), META))


def update(node: str, *messages: BaseMessage) -> tuple[str, Any]:
    return ("updates", {node: {"messages": list(messages)}})


def start(index: int, content: Any = TEXT) -> StreamTaskMessageStart:
    return StreamTaskMessageStart(index=index, content=content)


def text(index: int, value: str) -> StreamTaskMessageDelta:
    return StreamTaskMessageDelta(index=index, delta=TextDelta(text_delta=value))


def reason(index: int, value: str) -> StreamTaskMessageDelta:
    delta = ReasoningContentDelta(content_index=0, content_delta=value)
    return StreamTaskMessageDelta(index=index, delta=delta)


def done(index: int) -> StreamTaskMessageDone:
    return StreamTaskMessageDone(index=index)


def request(index: int, call_id: str, name: str, args: dict[str, Any]) -> StreamTaskMessageFull:
    content = ToolRequestContent(author="agent", tool_call_id=call_id, name=name, arguments=args)
    return StreamTaskMessageFull(index=index, content=content)


def calling(*calls: tuple[str, str, dict[str, Any]], msg_id: str | None = None) -> AIMessage:
    return AIMessage(
        content="",
        id=msg_id,
        tool_calls=[{"id": c, "name": n, "args": a, "type": "tool_call"} for c, n, a in calls],
    )


async def convert(items: Iterable[tuple[str, Any]], **kwargs: Any) -> list[StreamEvent]:
    return [event async for event in convert_langgraph_events(Source(items), **kwargs)]


async def test_plain_text_is_start_deltas_done() -> None:
    assert await convert([chunk("Hel"), chunk("lo")]) == [
        start(0),
        text(0, "Hel"),
        text(0, "lo"),
        done(0),
    ]


async def test_empty_and_non_ai_chunks_are_skipped() -> None:
    tool_chunk = ("messages", (ToolMessage(content="x", tool_call_id="c"), META))
    assert await convert([chunk(""), chunk([]), tool_chunk]) == []


async def test_text_reasoning_text_transitions() -> None:
    """I.101: str chunks, a reasoning summary block, then a text block."""
    summary = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}
    events = await convert(
        [chunk("a"), chunk("b"), chunk([summary]), chunk([{"type": "text", "text": "c"}])]
    )
    assert events == [
        start(0),
        text(0, "a"),
        text(0, "b"),
        done(0),
        start(1, REASONING),
        reason(1, "think"),
        done(1),
        start(2),
        text(2, "c"),
        done(2),
    ]


async def test_reasoning_blocks_wrap_reasoning_content() -> None:
    blocks = [
        {"type": "reasoning", "reasoning": "weigh "},
        {"type": "thinking", "thinking": "options"},
        {"type": "reasoning", "summary": []},  # empty: skipped
    ]
    assert await convert([chunk(blocks)]) == [
        start(0, REASONING),
        reason(0, "weigh "),
        reason(0, "options"),
        done(0),
    ]


async def test_a_reasoning_summary_in_additional_kwargs_opens_its_slot() -> None:
    kwargs = {"reasoning": {"summary": [{"type": "summary_text", "text": "plan"}]}}
    events = await convert([chunk("", additional_kwargs=kwargs), chunk("ok")])
    summary = ReasoningSummaryDelta(summary_index=0, summary_delta="plan")
    assert events == [
        start(0, REASONING),
        StreamTaskMessageDelta(index=0, delta=summary),
        done(0),
        start(1),
        text(1, "ok"),
        done(1),
    ]


async def test_a_whole_ai_message_counts_as_one_chunk() -> None:
    whole = ("messages", (AIMessage(content="all at once"), META))
    assert await convert([whole]) == [start(0), text(0, "all at once"), done(0)]


async def test_tool_requests_and_responses_are_full_events() -> None:
    ask = calling(("c1", "add", {"a": 1}), ("c2", "add", {"a": 2}), msg_id="m1")
    ok = ToolMessage(content="3", tool_call_id="c1", name="add")
    bad = ToolMessage(content="boom", tool_call_id="c2", name="add", status="error")
    events = await convert([chunk("let me add"), update("agent", ask), update("tools", ok, bad)])
    response = ToolResponseContent(author="agent", tool_call_id="c1", name="add", content="3")
    failed = ToolResponseContent(
        author="agent", tool_call_id="c2", name="add", content="boom", is_error=True
    )
    assert events == [
        start(0),
        text(0, "let me add"),
        done(0),
        request(1, "c1", "add", {"a": 1}),
        request(2, "c2", "add", {"a": 2}),
        StreamTaskMessageFull(index=3, content=response),
        StreamTaskMessageFull(index=4, content=failed),
    ]


async def test_any_node_counts_and_nothing_is_emitted_twice() -> None:
    ask = calling(("c1", "search", {"q": "x"}), msg_id="m1")
    answer = ToolMessage(content=["hit", {"type": "text", "text": "more"}], tool_call_id="c1")
    history = [HumanMessage(content="hi"), ask, answer]
    seen: list[AIMessage] = []
    events = await convert(
        [
            update("planner", ask),
            update("executor", answer),
            update("planner", *history),  # a node writing the whole history again
            ("updates", {"noop": None, "__interrupt__": ()}),
        ],
        on_final_ai_message=seen.append,
    )
    response = ToolResponseContent(
        author="agent",
        tool_call_id="c1",
        name="unknown",
        content=["hit", {"type": "text", "text": "more"}],
    )
    assert events == [
        request(0, "c1", "search", {"q": "x"}),
        StreamTaskMessageFull(index=1, content=response),
    ]
    assert seen == [ask]


async def test_the_callback_runs_after_the_tool_events_for_every_step() -> None:
    order: list[str] = []

    async def on_message(message: AIMessage) -> None:
        order.append(f"ai:{message.id}")

    first = calling(("c1", "t", {}), msg_id="m1")
    last = AIMessage(content="done", id="m2")
    items = [
        update("agent", first),
        update("tools", ToolMessage(content="r", tool_call_id="c1", name="t")),
        update("agent", last),
    ]
    async for event in convert_langgraph_events(Source(items), on_message):
        order.append(f"{event.type}:{event.index}")
    assert order == ["full:0", "ai:m1", "full:1", "ai:m2"]


async def test_yield_turn_equals_direct_and_derives_tool_spans() -> None:
    ask = calling(("c1", "clock", {"tz": "utc"}), msg_id="m1")
    items = [update("agent", ask), update("tools", ToolMessage("noon", tool_call_id="c1"))]
    direct = await convert(items)
    signals: list[SpanSignal] = []
    emitter = UnifiedEmitter(tracer=signals.append)
    via = [e async for e in emitter.yield_events(convert_langgraph_events(Source(items)))]
    assert via == direct
    assert signals == [
        OpenSpan("c1", "tool", "clock", {"tz": "utc"}),
        CloseSpan("c1", "noon", is_complete=True, is_error=None),
    ]


async def test_stopping_early_closes_the_source() -> None:
    """I.103: a consumer that stops mid-stream closes the graph's stream."""
    source = Source([chunk("a"), chunk("b"), chunk("c")])
    events = convert_langgraph_events(source)
    async for _ in events:
        break
    await events.aclose()
    assert source.closed


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def agent_graph(model: Any) -> Any:
    async def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([add]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


async def test_a_real_streaming_graph() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage(content="hello brave world")]))
    source = agent_graph(model).astream(
        {"messages": [HumanMessage("hi")]}, stream_mode=["messages", "updates"]
    )
    events = [e async for e in convert_langgraph_events(source)]
    assert events[0] == start(0) and events[-1] == done(0)
    deltas = [e.delta for e in events[1:-1] if isinstance(e, StreamTaskMessageDelta)]
    assert len(deltas) == len(events) - 2 > 1  # it really streamed, in several chunks
    assert "".join(d.text_delta or "" for d in deltas if isinstance(d, TextDelta)) == (
        "hello brave world"
    )


async def test_a_real_tool_calling_graph() -> None:
    model = FakeMessagesListChatModel(
        responses=[
            calling(("c1", "add", {"a": 1, "b": 2})),
            AIMessage(content="the answer is 3"),
        ]
    )
    source = agent_graph(model).astream(
        {"messages": [HumanMessage("1+2?")]}, stream_mode=["messages", "updates"]
    )
    events = [e async for e in convert_langgraph_events(source)]
    response = ToolResponseContent(author="agent", tool_call_id="c1", name="add", content="3")
    assert events == [
        request(0, "c1", "add", {"a": 1, "b": 2}),
        StreamTaskMessageFull(index=1, content=response),
        start(2),
        text(2, "the answer is 3"),
        done(2),
    ]
