"""A durable graph's ``updates`` and ``custom`` stream modes reach the canonical stream as
data events (``STREAM_DATA`` notes of the log, which ride with the turn's next write), and a
replay serves them with no model call (issue 42 item 3)."""

from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from tether.engine import Runtime
from tether.integrations.langgraph import JournaledChatModel, LangGraphHarness, durable
from tether.journal import STREAM_DATA, Journal
from tether.records import StepRecorded
from tether.store import Store
from tether.stream import DataContent, StreamTaskMessageFull, project

from .app import Counted, EchoChatModel, ExplodingChatModel
from .test_state import ask

Make = Callable[..., Runtime]


def reporting(
    model: JournaledChatModel, tools: list[BaseTool]
) -> CompiledStateGraph[Any, Any, Any, Any]:
    async def agent(state: Counted) -> dict[str, Any]:
        get_stream_writer()({"stage": "asking", "turn": state.get("count", 0)})
        reply = await model.ainvoke(state["messages"])
        return {"messages": [reply], "count": 1, "topics": [str(reply.content)]}

    graph = StateGraph(Counted)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile()


async def test_updates_and_custom_events_come_through_the_canonical_stream(
    make_runtime: Make, store: Store
) -> None:
    agent = durable(reporting, model=EchoChatModel(calls=[]), name="counter")
    async with make_runtime({"counter": agent}) as runtime:
        conversation_id, answer = await ask(runtime, "tides")
        records = await runtime.records(conversation_id)
    assert answer == "echo: tides"
    data = [
        event.content.data
        for event in project(records)
        if isinstance(event, StreamTaskMessageFull) and isinstance(event.content, DataContent)
    ]
    streamed = [d for d in data if str(d["kind"]).startswith("langgraph_")]
    assert streamed == [
        {"kind": "langgraph_custom", "data": {"stage": "asking", "turn": 0}},
        {
            "kind": "langgraph_update",
            "node": "agent",
            "update": {"count": 1, "topics": ["echo: tides"]},
        },
    ]
    notes = [
        r for r in records if isinstance(r.payload, StepRecorded) and r.payload.name == STREAM_DATA
    ]
    assert len(notes) == 2
    # A replay serves them from the log and asks no model.
    replayer = LangGraphHarness(reporting, model=ExplodingChatModel(), name="counter")
    journal = await Journal.open(store, conversation_id, fence=0)
    assert await journal.replay(replayer) == [answer]
