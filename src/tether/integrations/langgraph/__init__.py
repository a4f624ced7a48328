"""LangGraph for Tether: a tap to the canonical stream, and a durable adapter.

``TetherCheckpointer`` is LangGraph's checkpointer over a Tether store: an unmodified graph
compiled with ``checkpointer=TetherCheckpointer(url)`` keeps its checkpoints in session logs.
The tap turns ``graph.astream(..., stream_mode=["messages", "updates"])`` into Tether's
canonical (agentex-compatible) events. The adapter runs a MessagesState-style graph as a
durable Tether agent: its chat model and tools go through the journal, so a run survives
``kill -9``, replays with zero model calls and forks.

Example::

    from tether.integrations.langgraph import LangGraphTurn, durable
    from tether.stream import UnifiedEmitter

    turn = LangGraphTurn(graph.astream(inputs, stream_mode=["messages", "updates"]))
    async for event in UnifiedEmitter().yield_turn(turn):
        ...

    def agents():  # tether serve --app myapp:agents
        return {"react": durable(build_graph, model=chat_model, tools=[search], name="react")}
"""

from tether.integrations.langgraph._adapter import (
    CompiledGraph,
    GraphBuilder,
    LangGraphHarness,
    durable,
)
from tether.integrations.langgraph._checkpointer import TetherCheckpointer
from tether.integrations.langgraph._errors import NotJournaled, UnsupportedConstruct
from tether.integrations.langgraph._model import JournaledChatModel
from tether.integrations.langgraph._store import TetherStore
from tether.integrations.langgraph._tap import (
    LangGraphTurn,
    convert_langgraph_events,
    langgraph_usage,
)
from tether.integrations.langgraph._tools import JournaledTool

__all__ = (
    "CompiledGraph",
    "GraphBuilder",
    "JournaledChatModel",
    "JournaledTool",
    "LangGraphHarness",
    "LangGraphTurn",
    "NotJournaled",
    "TetherCheckpointer",
    "TetherStore",
    "UnsupportedConstruct",
    "convert_langgraph_events",
    "durable",
    "langgraph_usage",
)
