"""Running a LangGraph graph as a Tether harness."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import JsonValue

from tether.engine import AgentDefinition
from tether.integrations._bridge import durable_definition, turn_scope
from tether.integrations.langgraph._convert import message_text, to_langchain
from tether.integrations.langgraph._model import JournaledChatModel
from tether.integrations.langgraph._tools import JournaledTool
from tether.journal import Turn
from tether.messages import Mediation

__all__ = ("CompiledGraph", "GraphBuilder", "LangGraphHarness", "durable")


class CompiledGraph(Protocol):
    """What ``build`` returns: a compiled LangGraph graph (anything with ``ainvoke``)."""

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> Any: ...


GraphBuilder = Callable[[JournaledChatModel, list[BaseTool]], CompiledGraph]
"""``build(model, tools)``: the graph, written against the journaled model and tools."""


class LangGraphHarness:
    """A harness that runs a MessagesState-style graph over the session's transcript.

    Each execution invokes the graph with ``{"messages": history + inputs}`` and no
    checkpointer: Tether's log is the checkpoint. The answer is the text of the last AI
    message in the graph's final state.
    """

    def __init__(
        self,
        build: GraphBuilder,
        *,
        model: BaseChatModel,
        tools: Sequence[BaseTool] = (),
        name: str,
        version: str = "1",
        approval_tools: Collection[str] = (),
        idempotent_tools: Collection[str] = (),
        config: RunnableConfig | None = None,
    ) -> None:
        names = [tool.name for tool in tools]
        unknown = (set(approval_tools) | set(idempotent_tools)) - set(names)
        if unknown:
            raise ValueError(f"no such tools: {', '.join(sorted(unknown))}")
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique: {names}")
        self.name = name
        self.version = version
        self.model = JournaledChatModel(inner=model)
        self.tools: list[BaseTool] = [
            JournaledTool.wrap(
                tool,
                mediation=Mediation.APPROVAL if tool.name in approval_tools else Mediation.HOST,
                idempotent=tool.name in idempotent_tools,
            )
            for tool in tools
        ]
        self.graph = build(self.model, self.tools)
        self._config = config

    async def run(self, turn: Turn) -> JsonValue:
        messages = to_langchain([*turn.history, *turn.inputs])
        with turn_scope(turn):
            state = await self.graph.ainvoke({"messages": messages}, self._config)
        if turn.failure is not None:
            # The graph may have absorbed a park or a divergence (a tool error handler).
            raise turn.failure
        return final_text(state)


def final_text(state: Any) -> str:
    """The text of the last AI message of a graph's final state (``""`` if there is none)."""
    messages = state.get("messages") if isinstance(state, dict) else None
    for message in reversed(messages or []):
        if isinstance(message, AIMessage):
            return message_text(message.content)
        if not isinstance(message, BaseMessage):
            break
    return ""


def durable(
    build: GraphBuilder,
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool] = (),
    name: str,
    version: str = "1",
    approval_tools: Collection[str] = (),
    idempotent_tools: Collection[str] = (),
    config: RunnableConfig | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
) -> AgentDefinition:
    """A LangGraph graph as a durable Tether agent.

    ``build(model, tools)`` gets the journaled stand-ins of ``model`` and ``tools`` and returns
    the compiled graph (no checkpointer). Tools named in ``approval_tools`` wait for a human
    decision; tools named in ``idempotent_tools`` may run again after a crash cut their call.

    Example::

        def build(model, tools):
            return create_my_react_graph(model.bind_tools(tools), tools)

        def agents():
            return {"react": durable(build, model=ChatOpenAI(model="gpt-4o"), tools=[search],
                                     name="react")}
    """
    harness = LangGraphHarness(
        build,
        model=model,
        tools=tools,
        name=name,
        version=version,
        approval_tools=approval_tools,
        idempotent_tools=idempotent_tools,
        config=config,
    )
    return durable_definition(harness, max_attempts=max_attempts, timeout=timeout)
