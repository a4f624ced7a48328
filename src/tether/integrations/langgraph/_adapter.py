"""Running a LangGraph graph as a Tether harness."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt
from pydantic import JsonValue

from tether._canonical import canonical_json
from tether.engine import AgentDefinition
from tether.integrations._bridge import durable_definition, policy_for, turn_scope
from tether.integrations.langgraph._checks import Guard, check_graph
from tether.integrations.langgraph._convert import message_text, to_langchain
from tether.integrations.langgraph._errors import Refusals, refusals
from tether.integrations.langgraph._model import JournaledChatModel
from tether.integrations.langgraph._state import (
    MESSAGES,
    STATE_STEP,
    journaled_json,
    read_channels,
    seed_channels,
    state_channels,
)
from tether.integrations.langgraph._sync import sync_calls
from tether.integrations.langgraph._tap import CUSTOM_KIND, UPDATE_KIND
from tether.integrations.langgraph._tools import JournaledTool
from tether.journal import STREAM_DATA, Mode, ToolPolicy, Turn
from tether.messages import Mediation
from tether.models import ModelRetryPolicy
from tether.records import StepRecorded

__all__ = ("CompiledGraph", "GraphBuilder", "LangGraphHarness", "durable")


class CompiledGraph(Protocol):
    """What ``build`` returns: a compiled LangGraph graph (anything with ``ainvoke``)."""

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None) -> Any: ...


GraphBuilder = Callable[[JournaledChatModel, list[BaseTool]], CompiledGraph]
"""``build(model, tools)``: the graph, written against the journaled model and tools."""


class LangGraphHarness:
    """A harness that runs a StateGraph over the session's transcript, durably.

    Each execution starts the graph with ``{"messages": history + inputs}`` and its other
    channels as the last execution recorded them (see :mod:`._state`), on an in-memory
    checkpointer of its own: Tether's log is the checkpoint. A node that calls
    ``interrupt(value)`` parks the session as a Tether input (``turn.ask``); the answer resumes
    the graph as ``Command(resume=answer)`` does. The execution ends by recording the
    channels; its answer is the text of the last AI message.

    Raises ``UnsupportedConstruct`` for a graph whose effects or state would escape the journal.
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
        tool_policies: Mapping[str, ToolPolicy] | None = None,
    ) -> None:
        names = [tool.name for tool in tools]
        policies = dict(tool_policies or {})
        unknown = (set(approval_tools) | set(idempotent_tools) | set(policies) - {"*"}) - set(names)
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
                policy=policy_for(tool.name, policies),
            )
            for tool in tools
        ]
        self.graph = check_graph(build(self.model, self.tools))
        self._channels = state_channels(self.graph)
        self._kept = {name: c for name, c in self._channels.items() if name != MESSAGES}
        self._config = config

    async def run(self, turn: Turn) -> JsonValue:
        saver = InMemorySaver()  # this execution's scratch: what lasts is in the log
        graph = self.graph.copy(update={"checkpointer": saver})
        guard = Guard()
        config = merge_configs(
            self._config,
            {"configurable": {"thread_id": turn.execution_id}, "callbacks": [guard]},
        )
        if self._kept:
            restored = await turn.last_note(STATE_STEP)
            restored = restored if isinstance(restored, dict) else {}
            await seed_channels(
                saver, config, {k: v for k, v in restored.items() if k in self._kept}
            )
        graph_input: Any = {MESSAGES: to_langchain([*turn.history, *turn.inputs])}
        with turn_scope(turn), refusals() as refused:
            async with sync_calls():
                await _drive(turn, graph, graph_input, config, refused)
        values = await read_channels(saver, config, self._channels)
        if self._kept:
            await _record_state(turn, {k: v for k, v in values.items() if k in self._kept})
        return final_text(values)


async def _drive(
    turn: Turn,
    graph: CompiledStateGraph[Any, Any, Any, Any],
    graph_input: Any,
    config: RunnableConfig,
    refused: Refusals,
) -> None:
    """Run the graph until it ends, asking each ``interrupt()`` as a Tether input."""
    while True:
        # Checkpointed when the graph stops (done or interrupted), not at every step:
        # the scratch checkpoint would otherwise copy the whole transcript each time.
        async for mode, chunk in graph.astream(
            graph_input, config, durability="exit", stream_mode=["updates", "custom"]
        ):
            for data in _streamed(mode, chunk):
                await _stream(turn, data)
        refused.check()
        if turn.failure is not None:
            # The graph may have absorbed a park or a divergence (a tool error handler).
            raise turn.failure
        interrupts = (await graph.aget_state(config)).interrupts
        if not interrupts:
            return
        graph_input = Command(resume={i.id: await _ask(turn, i) for i in interrupts})


def _streamed(mode: str, chunk: Any) -> list[dict[str, JsonValue]]:
    """The data events of one chunk of the ``updates`` and ``custom`` stream modes: a node's
    writes besides its messages (which the log keeps as messages already), and what its
    stream writer wrote. JSON only, as the state: a replay compares them."""
    if mode == "custom":
        return [{"kind": CUSTOM_KIND, "data": journaled_json(chunk, "a custom event")}]
    found: list[dict[str, JsonValue]] = []
    for node, update in chunk.items() if isinstance(chunk, dict) else ():
        if not isinstance(update, dict) or str(node).startswith("__"):
            continue  # an interrupt, or a node's writes as a list (a Command's several)
        written = {
            str(name): journaled_json(value, f"the update of {name!r} by node {node!r}")
            for name, value in update.items()
            if name != MESSAGES
        }
        if written:
            found.append({"kind": UPDATE_KIND, "node": str(node), "update": written})
    return found


async def _stream(turn: Turn, data: dict[str, JsonValue]) -> None:
    """A streamed event as a ``STREAM_DATA`` note: no commit of its own, it rides with the
    turn's next write, and the canonical stream shows it as a data event."""
    if turn.mode is not Mode.LIVE:
        recorded = turn.next_recorded()
        if recorded is None and turn.mode is Mode.REPLAY:
            return
        if recorded is not None and not (
            isinstance(recorded.payload, StepRecorded) and recorded.payload.name == STREAM_DATA
        ):
            return  # recorded before the adapter streamed: nothing to serve it from
    await turn.note(STREAM_DATA, data)


async def _ask(turn: Turn, interrupt: Interrupt) -> JsonValue:
    """An ``interrupt(value)`` as a Tether input: its value is the request's ``args``, its
    text (or JSON) the prompt, its ``response_schema`` the answer's schema."""
    value = journaled_json(interrupt.value, "the interrupt's value")
    prompt = value if isinstance(value, str) else canonical_json(value).decode()
    schema = interrupt.response_schema
    return await turn.ask(
        prompt,
        schema=dict(schema) if isinstance(schema, dict) else None,
        tool="interrupt",
        args={"value": value},
    )


async def _record_state(turn: Turn, values: dict[str, Any]) -> None:
    state = {
        name: journaled_json(value, f"state channel {name!r}") for name, value in values.items()
    }
    if turn.mode is Mode.REPLAY and turn.next_recorded() is None:
        return  # recorded before the adapter kept the state: nothing to serve it from
    # A note rides with the execution's end (no commit of its own); replay compares it: the
    # model and tool calls matching, nodes that made another state of them diverge.
    await turn.note(STATE_STEP, state)


def final_text(state: Mapping[str, Any]) -> str:
    """The text of the last AI message of a graph's final state (``""`` if there is none)."""
    messages = state.get(MESSAGES)
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
    tool_policies: Mapping[str, ToolPolicy] | None = None,
    model_timeout: float | None = None,
    model_retry: ModelRetryPolicy | None = None,
) -> AgentDefinition:
    """A LangGraph graph as a durable Tether agent.

    ``build(model, tools)`` gets the journaled stand-ins of ``model`` and ``tools`` and returns
    the compiled ``StateGraph``, without a checkpointer: Tether's log keeps the graph's state
    between submissions and resumes its ``interrupt()`` calls. ``UnsupportedConstruct`` says
    what the graph may not use (see docs/langgraph.md). Tools named in ``approval_tools``
    wait for a human decision; tools named in ``idempotent_tools`` may run again after a
    crash cut their call. ``tool_policies`` bounds each tool's calls and retries a failed
    one, by tool name (``"*"``: any other; :class:`~tether.journal.ToolPolicy`);
    ``model_timeout`` and ``model_retry`` the model calls' (the runtime's when ``None``).

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
        tool_policies=tool_policies,
    )
    return durable_definition(
        harness,
        max_attempts=max_attempts,
        timeout=timeout,
        model_timeout=model_timeout,
        model_retry=model_retry,
    )
