"""What a durable LangGraph graph may use (issue 25 item 1): the constructs covered run live,
then replay from the log with no model call; those whose effects or state would escape the
journal are refused, at registration when they can be seen there, else at the call, before
anything runs."""

import operator
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool, tool
from langgraph.cache.memory import InMemoryCache
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, Send, interrupt
from pydantic import JsonValue
from typing_extensions import TypedDict

from tether import SessionKey
from tether.errors import InputParked
from tether.integrations.langgraph import (
    CompiledGraph,
    JournaledChatModel,
    LangGraphHarness,
    NotJournaled,
    UnsupportedConstruct,
)
from tether.journal import Journal
from tether.records import UserMessage
from tether.store import MemoryStore

from .app import TOOL_RUNS, EchoChatModel, ExplodingChatModel, ScriptedChatModel, build, lookup

Build = Callable[[JournaledChatModel, list[BaseTool]], Any]


def single(node: Any, state: Any = MessagesState) -> CompiledGraph:
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(state)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    return graph.compile()


async def session(
    store: MemoryStore, instance: str = "acme", conversation_id: str = "conv"
) -> Journal:
    key = SessionKey("graph", instance)
    conversation, _ = await store.ensure_conversation(
        key, conversation_id=conversation_id, created_at=datetime.now(UTC)
    )
    return await Journal.open(store, conversation.id)


async def live_then_replay(
    build: Build, model: ScriptedChatModel, tools: Sequence[BaseTool] = (), *bodies: str
) -> list[JsonValue]:
    """Run ``bodies`` live, then replay them with a model that fails if it is asked."""
    store = MemoryStore()
    journal = await session(store)
    harness = LangGraphHarness(build, model=model, tools=tools, name="graph")
    outputs = [(await journal.exec(harness, [UserMessage(body=b)])).output for b in bodies]
    runs = len(TOOL_RUNS)
    replayer = LangGraphHarness(build, model=ExplodingChatModel(), tools=tools, name="graph")
    assert await (await Journal.open(store, "conv", fence=0)).replay(replayer) == outputs
    assert len(TOOL_RUNS) == runs  # no tool ran again
    return outputs


# --- covered ----------------------------------------------------------------------------


def prebuilt(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    return create_react_agent(model, tools)


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
async def test_covered_prebuilt_react_agent() -> None:
    model = ScriptedChatModel(calls=[])
    assert await live_then_replay(prebuilt, model, [lookup], "tides") == [
        "answer: facts about tides"
    ]
    assert model.calls == ["1:lookup", "1:answer"]


def routed(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    """A node that routes with ``Command(goto=..., update=...)``."""

    async def route(state: MessagesState) -> Command[str]:
        return Command(goto="answer", update={"messages": []})

    async def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("route", route, destinations=("answer",))
    graph.add_node("answer", answer)
    graph.add_edge(START, "route")
    graph.add_edge("answer", END)
    return graph.compile()


async def test_covered_command_routing() -> None:
    assert await live_then_replay(routed, EchoChatModel(calls=[]), (), "hi") == ["echo: hi"]


class Fanned(MessagesState):
    answers: Annotated[list[str], operator.add]


class Topic(TypedDict):
    topic: str


def fan_out(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    """``Send`` one worker per word; each asks the model; the last node asks it once more."""

    def spread(state: Fanned) -> list[Send]:
        words = str(state["messages"][-1].content).split()
        return [Send("worker", {"topic": word}) for word in words]

    async def worker(state: Topic) -> dict[str, Any]:
        reply = await model.ainvoke([HumanMessage(content=state["topic"])])
        return {"answers": [str(reply.content)]}

    async def gather(state: Fanned) -> dict[str, Any]:
        told = HumanMessage(content=" / ".join(sorted(state["answers"])))
        return {"messages": [await model.ainvoke([*state["messages"], told])]}

    graph = StateGraph(Fanned)
    graph.add_node("worker", worker)
    graph.add_node("gather", gather)
    graph.add_conditional_edges(START, spread, ["worker"])
    graph.add_edge("worker", "gather")
    graph.add_edge("gather", END)
    return graph.compile()


async def test_covered_send_fan_out_with_parallel_model_calls() -> None:
    model = EchoChatModel(calls=[])
    [output] = await live_then_replay(fan_out, model, (), "tides moons comets")
    assert output == "echo: echo: comets / echo: moons / echo: tides"
    assert len(model.calls) == 4


def with_subgraph(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    """A compiled subgraph as a node (no checkpointer of its own): it asks the model, then a
    person."""

    async def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    async def confirm(state: MessagesState) -> dict[str, Any]:
        reply = interrupt("Keep this answer?")
        return {"messages": [HumanMessage(content=f"kept: {reply}")]}

    inner = StateGraph(MessagesState)
    inner.add_node("answer", answer)
    inner.add_node("confirm", confirm)
    inner.add_edge(START, "answer")
    inner.add_edge("answer", "confirm")
    inner.add_edge("confirm", END)
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner.compile())
    outer.add_node("again", answer)
    outer.add_edge(START, "inner")
    outer.add_edge("inner", "again")
    outer.add_edge("again", END)
    return outer.compile()


async def test_covered_subgraph_with_an_interrupt_inside() -> None:
    store = MemoryStore()
    journal = await session(store)
    model = EchoChatModel(calls=[])
    harness = LangGraphHarness(with_subgraph, model=model, name="graph")
    with pytest.raises(InputParked) as parked:
        await journal.exec(harness, [UserMessage(body="hi")])
    await journal.answer(parked.value.input_id, "yes", responder="ann")
    result = await journal.resume(harness)
    assert result.output == "echo: kept: yes"
    assert model.calls == ["1:echo", "2:echo"]  # the subgraph's call was not made again
    replayer = LangGraphHarness(with_subgraph, model=ExplodingChatModel(), name="graph")
    assert await (await Journal.open(store, "conv", fence=0)).replay(replayer) == [result.output]


INNER_MODEL = EchoChatModel(calls=[])


@tool
async def summarize(text: str) -> str:
    """Summarize with a model of its own (the tool's outcome is what the journal keeps)."""
    reply = await INNER_MODEL.ainvoke(text)
    return f"summary: {reply.content}"


async def test_covered_a_journaled_tool_that_asks_a_model_of_its_own() -> None:
    INNER_MODEL.calls.clear()

    def asks_summary(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
        graph = StateGraph(MessagesState)
        graph.add_node("call", lambda state: {"messages": [calling(state)]})
        graph.add_node("tools", ToolNode(tools))
        graph.add_node("answer", answer_with(model))
        graph.add_edge(START, "call")
        graph.add_edge("call", "tools")
        graph.add_edge("tools", "answer")
        graph.add_edge("answer", END)
        return graph.compile()

    outputs = await live_then_replay(asks_summary, EchoChatModel(calls=[]), [summarize], "hi")
    assert outputs == ["echo: hi"]
    assert INNER_MODEL.calls == ["1:echo"]  # inside the journaled call: once, never replayed


def calling(state: MessagesState) -> AIMessage:
    call = {"name": "summarize", "args": {"text": "long text"}, "id": "call-s"}
    return AIMessage(content="", tool_calls=[call])


def answer_with(model: JournaledChatModel) -> Any:
    async def answer(state: MessagesState) -> dict[str, Any]:
        human = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        return {"messages": [await model.ainvoke(human)]}

    return answer


# --- refused at registration ------------------------------------------------------------

RAW = EchoChatModel(calls=[])


def echo_node(model: JournaledChatModel) -> Any:
    async def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    return node


def compiled_with(**options: Any) -> Build:
    def build_it(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
        graph = StateGraph(MessagesState)
        graph.add_node("node", echo_node(model))
        graph.add_edge(START, "node")
        graph.add_edge("node", END)
        return graph.compile(**options)

    return build_it


def own_checkpointer_subgraph(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    inner = compiled_with(checkpointer=True)(model, tools)
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner)
    outer.add_edge(START, "inner")
    outer.add_edge("inner", END)
    return outer.compile()


def functional(model: JournaledChatModel, tools: list[BaseTool]) -> Any:
    @entrypoint()
    async def run(messages: list[BaseMessage]) -> str:
        return str((await model.ainvoke(messages)).content)

    return run


class NoMessages(TypedDict):
    question: str


class Deltas(MessagesState):
    log: Annotated[list[str], DeltaChannel(operator.add)]


def raw_model_in_closure(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    raw = EchoChatModel(calls=[])

    async def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await raw.ainvoke(state["messages"])]}

    return single(node)


async def global_model_node(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await RAW.ainvoke(state["messages"])]}


class Shelf(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return [Document(page_content=query)]


SHELF = Shelf()


async def retrieving(state: MessagesState) -> dict[str, Any]:
    docs = await SHELF.ainvoke("q")
    return {"messages": [AIMessage(content=docs[0].page_content)]}


REFUSED_AT_REGISTRATION: dict[str, tuple[Build, str]] = {
    "a checkpointer": (compiled_with(checkpointer=InMemorySaver()), "with a checkpointer"),
    "a store": (compiled_with(store=InMemoryStore()), "with a store"),
    "a node cache": (compiled_with(cache=InMemoryCache()), "with a node cache"),
    "interrupt_before": (compiled_with(interrupt_before=["node"]), "static breakpoints"),
    "interrupt_after": (compiled_with(interrupt_after=["node"]), "static breakpoints"),
    "a subgraph with its own checkpointer": (
        own_checkpointer_subgraph,
        "subgraph 'inner' is compiled with its own checkpointer",
    ),
    "the functional API": (functional, "must return a compiled StateGraph"),
    "a state without messages": (
        lambda m, t: single(lambda s: {}, NoMessages),
        "no 'messages' channel",
    ),
    "an input schema without messages": (
        lambda m, t: (
            StateGraph(MessagesState, input_schema=NoMessages)
            .add_node("node", echo_node(m))
            .add_edge(START, "node")
            .compile()
        ),
        "input schema has no 'messages'",
    ),
    "a DeltaChannel": (lambda m, t: single(echo_node(m), Deltas), "DeltaChannel"),
    "a model in a node's closure": (raw_model_in_closure, "uses the model EchoChatModel"),
    "a model in a global": (lambda m, t: single(global_model_node), "uses the model"),
    "a model as a node": (lambda m, t: single(RAW), "uses the model EchoChatModel"),
    "a ToolNode of unwrapped tools": (
        lambda m, t: single(ToolNode([lookup])),
        "uses the tool 'lookup' unwrapped",
    ),
    "a retriever": (lambda m, t: single(retrieving), "uses the retriever Shelf"),
}


@pytest.mark.parametrize("construct", sorted(REFUSED_AT_REGISTRATION))
def test_refused_at_registration(construct: str) -> None:
    build_it, message = REFUSED_AT_REGISTRATION[construct]
    with pytest.raises(UnsupportedConstruct, match=message):
        LangGraphHarness(build_it, model=EchoChatModel(calls=[]), tools=[lookup], name="g")


# --- refused when called ----------------------------------------------------------------


class Holder:
    """Hides a model and a tool from the registration check (an attribute, not a value)."""

    def __init__(self) -> None:
        self.model = EchoChatModel(calls=[])
        self.tool = lookup


HOLDER = Holder()


async def hidden_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await HOLDER.model.ainvoke(state["messages"])]}


async def hidden_tool(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(content=await HOLDER.tool.ainvoke({"topic": "x"}))]}


@tool("lookup")
async def interrupting(topic: str) -> str:
    """Ask a person from inside the tool."""
    return str(interrupt(f"look up {topic}?"))


@tool("lookup")
async def commanding(topic: str) -> Command[str]:
    """Update the graph from inside the tool."""
    return Command(update={"messages": []})


def uses(tools: list[BaseTool]) -> CompiledGraph:
    graph = StateGraph(MessagesState)
    graph.add_node("call", lambda state: {"messages": [calling_lookup()]})
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=True))  # swallows errors
    graph.add_edge(START, "call")
    graph.add_edge("call", "tools")
    graph.add_edge("tools", END)
    return graph.compile()


def calling_lookup() -> AIMessage:
    call = {"name": "lookup", "args": {"topic": "tides"}, "id": "call-l"}
    return AIMessage(content="", tool_calls=[call])


async def odd_interrupt(state: MessagesState) -> dict[str, Any]:
    interrupt({"at": datetime.now(UTC)})
    return {}


REFUSED_WHEN_CALLED: dict[str, tuple[Build, BaseTool, str]] = {
    "a model the check cannot see": (
        lambda m, t: single(hidden_model),
        lookup,
        "the model 'EchoChatModel' was called inside the graph without going through",
    ),
    "a tool invoked by hand": (
        lambda m, t: single(hidden_tool),
        lookup,
        "the tool 'lookup' ran inside the graph without going through the journal",
    ),
    "interrupt() inside a tool": (
        lambda m, t: uses(t),
        interrupting,
        "tool 'lookup' raised GraphInterrupt",
    ),
    "a tool answering with a Command": (
        lambda m, t: uses(t),
        commanding,
        "tool 'lookup' returned Command",
    ),
    "an interrupt value that is not JSON": (
        lambda m, t: single(odd_interrupt),
        lookup,
        r"the interrupt's value\.at holds a datetime",
    ),
}


@pytest.mark.parametrize("construct", sorted(REFUSED_WHEN_CALLED))
async def test_refused_when_called(construct: str) -> None:
    build_it, tool_, message = REFUSED_WHEN_CALLED[construct]
    harness = LangGraphHarness(build_it, model=EchoChatModel(calls=[]), tools=[tool_], name="g")
    journal = await session(MemoryStore())
    runs = len(TOOL_RUNS)
    with pytest.raises(NotJournaled, match=message):
        await journal.exec(harness, [UserMessage(body="hi")])
    assert HOLDER.model.calls == [] and len(TOOL_RUNS) == runs  # refused before it ran
    [failed] = [r for r in await journal.records() if r.kind == "execution_failed"]
    assert failed.payload.to_json_object()["errorCode"] == NotJournaled.code


def test_the_react_app_graph_passes_the_checks() -> None:
    LangGraphHarness(build, model=ScriptedChatModel(calls=[]), tools=[lookup], name="react")
