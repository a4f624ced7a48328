"""The journaled chat model around the real ``ChatOpenAI`` (issue 36 item 3), over HTTP to the
fake OpenAI API: however a graph wraps the model ``build()`` gets (``bind_tools``,
``with_structured_output`` in each of its methods, ``with_config``, ``with_retry``,
``prompt | model``), and however a node calls it (``ainvoke``, ``astream``, and ``invoke`` /
``stream`` from a plain-function node), each call goes through the turn's model effect, is
recorded, replays with no request and resumes after a crash without asking a finished call
again."""

import json
from collections.abc import Callable
from typing import Any, Literal

import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.globals import set_llm_cache
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel, JsonValue

from tether.engine import Runtime
from tether.integrations.langgraph import (
    CompiledGraph,
    JournaledChatModel,
    LangGraphHarness,
    NotJournaled,
    durable,
)
from tether.records import UserMessage
from tether.store import MemoryStore, Store

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ..cuts import replay_sends_nothing, resume_over_http_from_every_cut
from .app import build, lookup
from .app import chat_openai as chat
from .test_constructs import session, single

TIDES = (Answer(calls=(Call("lookup", {"topic": "tides"}),)), Answer(text="High at noon."))
"""The ReAct graph's two answers: a lookup, then the answer."""

Make = Callable[..., Runtime]
Build = Callable[[JournaledChatModel, list[BaseTool]], CompiledGraph]
Wrap = Callable[[JournaledChatModel, list[BaseTool]], Runnable[Any, Any]]


async def live_then_replay(
    fake: FakeOpenAI, build: Build, answers: tuple[Answer, ...], *, model: ChatOpenAI | None = None
) -> tuple[JsonValue, Store]:
    """One execution live on the real ChatOpenAI, asking exactly ``answers``; then replayed
    offline with zero requests. Its output and the store it is in."""
    fake.add(*answers)
    store = MemoryStore()
    journal = await session(store)
    harness = LangGraphHarness(build, model=model or chat(), tools=[lookup], name="graph")
    outcome = await journal.exec(harness, [UserMessage(body="tides")])
    assert fake.count == len(answers), fake.requests
    records = await store.read("conv")
    kinds = [r.kind for r in records]
    assert kinds.count("model_called") == kinds.count("assistant_message_completed")
    assert kinds.count("model_called") == len(answers)
    replayer = LangGraphHarness(build, model=chat(), tools=[lookup], name="graph")
    assert await replay_sends_nothing(store, fake, "conv", replayer) == [outcome.output]
    return outcome.output, store


def react_with(wrap: Wrap, call: Literal["ainvoke", "astream", "invoke", "stream"]) -> Build:
    """The guide's ReAct graph, its model wrapped by ``wrap`` and called by ``call``."""

    def build(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
        bound = wrap(model, tools)

        async def ainvoke(state: MessagesState) -> dict[str, list[BaseMessage]]:
            return {"messages": [await bound.ainvoke(state["messages"])]}

        async def astream(state: MessagesState) -> dict[str, list[BaseMessage]]:
            return {"messages": [whole([c async for c in bound.astream(state["messages"])])]}

        def invoke(state: MessagesState) -> dict[str, list[BaseMessage]]:
            return {"messages": [bound.invoke(state["messages"])]}

        def stream(state: MessagesState) -> dict[str, list[BaseMessage]]:
            return {"messages": [whole(list(bound.stream(state["messages"])))]}

        nodes = {"ainvoke": ainvoke, "astream": astream, "invoke": invoke, "stream": stream}
        graph = StateGraph(MessagesState)
        graph.add_node("agent", nodes[call])
        graph.add_node("tools", ToolNode(tools))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition, ["tools", END])
        graph.add_edge("tools", "agent")
        return graph.compile()

    return build


def whole(chunks: list[Any]) -> BaseMessage:
    """A streamed answer as one message (a journaled call streams it in one piece)."""
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert isinstance(merged, BaseMessage)
    return merged if not isinstance(merged, AIMessageChunk) else AIMessage(**merged.model_dump())


# --- the guide's graph, on every store -----------------------------------------------------


async def test_the_guides_react_graph_on_chat_openai_is_journaled(
    make_runtime: Make, store: Store, fake: FakeOpenAI
) -> None:
    fake.add(*TIDES)
    react = durable(build, model=chat(), tools=[lookup], name="react")
    async with make_runtime({"react": react}) as runtime:
        receipt = await runtime.dispatch("react", "acme", "tides")
        outcome = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert outcome == {"status": "succeeded", "result": "High at noon."}
    assert fake.count == 2
    first, second = fake.requests
    assert [tool["function"]["name"] for tool in first.body["tools"]] == ["lookup"]
    assert second.body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1_0",
        "content": "facts about tides",
    }
    kinds = [r.kind for r in records]
    assert kinds.count("model_called") == 2 and kinds.count("assistant_message_completed") == 2
    assert kinds.count("tool_called") == 1 and kinds.count("tool_outcome") == 1

    def harness() -> LangGraphHarness:
        return LangGraphHarness(build, model=chat(), tools=[lookup], name="react")

    conversation = receipt.conversation_id
    assert await replay_sends_nothing(store, fake, conversation, harness()) == ["High at noon."]
    await resume_over_http_from_every_cut(
        store, fake, conversation, "High at noon.", TIDES, harness
    )


# --- however the model is wrapped and called -----------------------------------------------

PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Look things up before you answer."), MessagesPlaceholder("messages")]
)

WRAPS: dict[str, Wrap] = {
    "bind_tools": lambda model, tools: model.bind_tools(tools),
    "with_config": lambda model, tools: model.bind_tools(tools).with_config(tags=["agent"]),
    "with_retry": lambda model, tools: model.bind_tools(tools).with_retry(stop_after_attempt=2),
    "prompt | model": lambda model, tools: PROMPT | model.bind_tools(tools),
    "bind_tools(parallel_tool_calls=False)": lambda model, tools: model.bind_tools(
        tools, parallel_tool_calls=False
    ),
}


@pytest.mark.parametrize("wrap", sorted(WRAPS))
async def test_a_wrapped_model_is_journaled(fake: FakeOpenAI, wrap: str) -> None:
    output, _ = await live_then_replay(fake, react_with(WRAPS[wrap], "ainvoke"), TIDES)
    assert output == "High at noon."
    first = fake.requests[0].body
    assert [tool["function"]["name"] for tool in first["tools"]] == ["lookup"]
    if wrap == "prompt | model":
        assert first["messages"][0] == {
            "role": "system",
            "content": "Look things up before you answer.",
        }
    if wrap.startswith("bind_tools("):
        assert first["parallel_tool_calls"] is False


@pytest.mark.parametrize("call", ["ainvoke", "astream", "invoke", "stream"])
async def test_every_way_a_node_calls_the_model_is_journaled(fake: FakeOpenAI, call: Any) -> None:
    graph = react_with(WRAPS["bind_tools"], call)
    output, store = await live_then_replay(fake, graph, TIDES)
    assert output == "High at noon."

    def harness() -> LangGraphHarness:
        return LangGraphHarness(graph, model=chat(), tools=[lookup], name="graph")

    await resume_over_http_from_every_cut(store, fake, "conv", output, TIDES, harness)


async def test_a_model_that_does_not_stream_is_journaled_in_one_piece(fake: FakeOpenAI) -> None:
    graph = react_with(WRAPS["bind_tools"], "ainvoke")
    output, _ = await live_then_replay(fake, graph, TIDES, model=chat(disable_streaming=True))
    assert output == "High at noon."
    assert [r.stream for r in fake.requests] == [False, False]


def blocking(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    async def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}  # would block the loop

    return single(node)


def undescribable(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    bound = model.bind(logit_bias=object())  # the call's hash could not cover it

    async def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    return single(node)


REFUSED: dict[str, tuple[Build, str]] = {
    "a sync call from an async node": (blocking, "would block the event loop"),
    "an argument that is not JSON": (undescribable, "arguments the journal cannot describe"),
}


@pytest.mark.parametrize("refused", sorted(REFUSED))
async def test_a_call_the_journal_cannot_take_is_refused_before_it_is_made(
    fake: FakeOpenAI, refused: str
) -> None:
    build, reason = REFUSED[refused]
    journal = await session(MemoryStore())
    harness = LangGraphHarness(build, model=chat(), name="graph")
    with pytest.raises(NotJournaled, match=reason):
        await journal.exec(harness, [UserMessage(body="tides")])
    assert fake.count == 0


async def test_an_answer_of_the_global_llm_cache_is_journaled_too(fake: FakeOpenAI) -> None:
    """The journaled model never answers from LangChain's global cache (that answer would be
    in no log); ChatOpenAI inside it streams, which the cache does not answer either."""
    fake.add(Answer(text="High at noon."), Answer(text="High at noon."))
    graph = react_with(lambda model, tools: model, "ainvoke")
    store = MemoryStore()
    set_llm_cache(InMemoryCache())
    try:
        for instance in ("a", "b"):  # the same question twice
            journal = await session(store, instance, f"conv-{instance}")
            harness = LangGraphHarness(graph, model=chat(), name="graph")
            outcome = await journal.exec(harness, [UserMessage(body="tides")])
            assert outcome.output == "High at noon."
    finally:
        set_llm_cache(None)
    assert fake.count == 2
    for conversation in ("conv-a", "conv-b"):  # each log has the call, and replays from it
        kinds = [r.kind for r in await store.read(conversation)]
        assert kinds.count("assistant_message_completed") == 1
        replayer = LangGraphHarness(graph, model=chat(), name="graph")
        assert await replay_sends_nothing(store, fake, conversation, replayer) == ["High at noon."]


# --- with_structured_output, in each of its methods -----------------------------------------


class Verdict(BaseModel):
    """Whether the tide is high."""

    tide: str
    high: bool


VERDICT = {"tide": "in", "high": True}
STRUCTURED: dict[str, Answer] = {
    "function_calling": Answer(calls=(Call("Verdict", VERDICT),)),
    "json_schema": Answer(text=json.dumps(VERDICT)),
    "json_mode": Answer(text=json.dumps(VERDICT)),
}


def judging(method: str, *, include_raw: bool = False, sync: bool = False) -> Build:
    """One node asking for a ``Verdict``; the answer says what was parsed."""

    def build(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
        judge = model.with_structured_output(Verdict, method=method, include_raw=include_raw)

        def said(verdict: Any) -> dict[str, Any]:
            parsed = verdict["parsed"] if include_raw else verdict
            assert isinstance(parsed, Verdict), verdict
            return {"messages": [AIMessage(content=f"{parsed.tide}, high: {parsed.high}")]}

        async def node(state: MessagesState) -> dict[str, Any]:
            return said(await judge.ainvoke(state["messages"]))

        def sync_node(state: MessagesState) -> dict[str, Any]:
            return said(judge.invoke(state["messages"]))

        return single(sync_node if sync else node)

    return build


# langchain-openai's stream of a structured output dumps the SDK's parsed chunk, whose typed
# ``parsed`` field warns (a library's own warning, not Tether's: the answer is right).
serializer_warning = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")


@serializer_warning
@pytest.mark.parametrize("method", sorted(STRUCTURED))
async def test_structured_output_is_journaled_in_every_method(
    fake: FakeOpenAI, method: str
) -> None:
    answers = (STRUCTURED[method],)
    output, store = await live_then_replay(fake, judging(method), answers)
    assert output == "in, high: True"
    body = fake.requests[0].body
    if method == "function_calling":
        assert body["tool_choice"] == {"type": "function", "function": {"name": "Verdict"}}
        assert [tool["function"]["name"] for tool in body["tools"]] == ["Verdict"]
    elif method == "json_schema":
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "Verdict"
    else:
        assert body["response_format"] == {"type": "json_object"}

    def harness() -> LangGraphHarness:
        return LangGraphHarness(judging(method), model=chat(), tools=[lookup], name="graph")

    await resume_over_http_from_every_cut(store, fake, "conv", output, answers, harness)


@serializer_warning
@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_structured_output_with_its_raw_message_is_journaled(
    fake: FakeOpenAI, sync: bool
) -> None:
    build = judging("json_schema", include_raw=True, sync=sync)
    output, _ = await live_then_replay(fake, build, (STRUCTURED["json_schema"],))
    assert output == "in, high: True"


async def test_the_arguments_a_wrapper_binds_are_part_of_the_calls_hash(fake: FakeOpenAI) -> None:
    _, store = await live_then_replay(fake, judging("json_mode"), (STRUCTURED["json_mode"],))
    other = LangGraphHarness(judging("function_calling"), model=chat(), name="graph")
    with pytest.raises(Exception, match="hash mismatch"):
        await replay_sends_nothing(store, fake, "conv", other)
