"""What a durable graph may not do, refused at registration or, failing that, at the call.

At registration (:func:`check_graph`): a graph that is not a compiled ``StateGraph``, or
that brings its own persistence or memory (a checkpointer, a store, a node cache, a subgraph
with a checkpointer of its own), static breakpoints, a state with no ``messages`` to carry
the transcript, and nodes that hold a chat model, a tool or a retriever Tether did not wrap.

At the call (:class:`Guard`, a LangChain callback handler on every run): any chat model, LLM,
tool or retriever that starts inside the graph and is not a journaled stand-in (or run by a
journaled tool, whose outcome is what the journal keeps) is refused before it runs, so a
model in a global, or a tool called by hand, fails loudly instead of being asked again on
every resume and replay.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseLanguageModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    RunnableBinding,
    RunnableParallel,
    RunnableSequence,
    RunnableWithFallbacks,
)
from langchain_core.tools import BaseTool
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

from tether.integrations.langgraph._errors import UnsupportedConstruct, refuse
from tether.integrations.langgraph._model import JournaledChatModel
from tether.integrations.langgraph._state import MESSAGES
from tether.integrations.langgraph._store import TetherStore
from tether.integrations.langgraph._tools import JOURNALED_TAG, JournaledTool

__all__ = ("Guard", "check_graph")

_JOURNALED_TYPE = "tether-journaled-"
"""How a journaled model's ``_llm_type`` starts (the callbacks report it as ``_type``)."""


def check_graph(graph: object) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``graph`` if Tether can run it durably; else ``UnsupportedConstruct`` saying why."""
    if not isinstance(graph, CompiledStateGraph):
        raise UnsupportedConstruct(
            f"build() returned a {type(graph).__name__}: it must return a compiled StateGraph "
            "(StateGraph(...).compile()); the functional API and other runnables are not "
            "supported"
        )
    _check_persistence("the graph", graph, root=True)
    channels = graph.builder.channels
    if MESSAGES not in channels:
        raise UnsupportedConstruct(
            "the graph's state has no 'messages' channel: the session's transcript is handed "
            "to the graph there (use MessagesState, or a messages key with add_messages)"
        )
    inputs = graph.builder.schemas.get(graph.builder.input_schema, {})
    if MESSAGES not in inputs:
        raise UnsupportedConstruct(
            "the graph's input schema has no 'messages' key: each submission starts the graph "
            "with the transcript as its input messages"
        )
    for name, channel in channels.items():
        if isinstance(channel, DeltaChannel):
            raise UnsupportedConstruct(
                f"state channel {name!r} is a DeltaChannel, whose value lives in LangGraph's "
                "checkpoint history: use a plain reducer (Annotated[list, operator.add])"
            )
    for name, subgraph in graph.get_subgraphs(recurse=True):
        if isinstance(subgraph, Pregel):
            _check_persistence(f"subgraph {name!r}", subgraph, root=False)
    for name, node in graph.builder.nodes.items():
        for found in _reachable(node.runnable):
            _check_node_object(name, found)
    return graph


def _check_persistence(what: str, graph: Pregel[Any, Any, Any, Any], *, root: bool) -> None:
    checkpointer = graph.checkpointer
    if checkpointer is not None and not (checkpointer is False and not root):
        kind = "its own checkpointer" if checkpointer is True else "a checkpointer"
        raise UnsupportedConstruct(
            f"{what} is compiled with {kind}: Tether's log is the checkpoint (it keeps the "
            "state between submissions and resumes interrupts), so compile() it without one"
        )
    if graph.store is not None and not isinstance(graph.store, TetherStore):
        raise UnsupportedConstruct(
            f"{what} is compiled with a store: its reads and writes would happen outside the "
            "journal (a resume or a replay would see other data); compile it with "
            "store=TetherStore(memory), whose operations are journaled (docs/memory.md)"
        )
    if graph.cache is not None:
        raise UnsupportedConstruct(
            f"{what} is compiled with a node cache, which would answer nodes from outside the "
            "journal: compile() it without one (the journal already serves recorded calls)"
        )
    if graph.interrupt_before_nodes or graph.interrupt_after_nodes:
        raise UnsupportedConstruct(
            f"{what} has static breakpoints (interrupt_before / interrupt_after): call "
            "langgraph.types.interrupt() in the node instead, which parks the session as a "
            "Tether input until someone answers"
        )


def _reachable(runnable: object, depth: int = 0) -> Iterator[object]:
    """What a node's runnable holds that could call out: its parts, and the values its
    functions reach (closure cells and globals), one level down."""
    if depth > 6:
        return
    yield runnable
    if isinstance(runnable, JournaledChatModel | JournaledTool | Pregel):
        return  # a stand-in wraps its native object on purpose; a subgraph is checked itself
    parts: list[object] = []
    if isinstance(runnable, ToolNode):
        parts.extend(runnable.tools_by_name.values())
    if isinstance(runnable, RunnableBinding):
        parts.append(runnable.bound)
    elif isinstance(runnable, RunnableSequence):
        parts.extend(runnable.steps)
    elif isinstance(runnable, RunnableParallel):
        parts.extend(runnable.steps__.values())
    elif isinstance(runnable, RunnableWithFallbacks):
        parts.extend([runnable.runnable, *runnable.fallbacks])
    for attribute in ("func", "afunc"):
        function = getattr(runnable, attribute, None)
        if depth == 0 and inspect.isfunction(function):
            parts.extend(_reached_by(function))
    for part in parts:
        yield from _reachable(part, depth + 1)


def _reached_by(function: Callable[..., Any]) -> Iterator[object]:
    try:
        reached = inspect.getclosurevars(function)
    except (TypeError, ValueError):
        return
    for value in (*reached.nonlocals.values(), *reached.globals.values()):
        if isinstance(value, list | tuple):
            yield from value
        elif isinstance(value, dict):
            yield from value.values()
        else:
            yield value


def _check_node_object(node: str, found: object) -> None:
    if isinstance(found, JournaledChatModel | JournaledTool):
        return
    if isinstance(found, BaseLanguageModel):
        raise UnsupportedConstruct(
            f"node {node!r} uses the model {type(found).__name__} directly: its calls would not "
            "be journaled (a resume or a replay would ask it again); use the model build() "
            "was given, or pass this one as durable(model=...)"
        )
    if isinstance(found, BaseTool):
        raise UnsupportedConstruct(
            f"node {node!r} uses the tool {found.name!r} unwrapped: its calls would not be "
            "journaled (a resume could run it twice); use the tools build() was given"
        )
    if isinstance(found, BaseRetriever):
        raise UnsupportedConstruct(
            f"node {node!r} uses the retriever {type(found).__name__}, which reads outside the "
            "journal: offer it to the model as a tool, or wrap the lookup in "
            "tether.integrations.step"
        )


class Guard(BaseCallbackHandler):
    """Refuses, before it runs, every model, tool or retriever call inside the graph that
    the journal would not keep (see :func:`refuse`: a node that swallows the refusal, a
    ``ToolNode`` turning errors into messages, still fails the run)."""

    raise_error = True
    run_inline = True

    def _refuse(self, message: str) -> None:
        refuse(message)

    def _model(self, serialized: dict[str, Any] | None, tags: list[str] | None, **kw: Any) -> None:
        params = kw.get("invocation_params") or {}
        kind = params.get("_type") if isinstance(params, dict) else None
        if isinstance(kind, str) and kind.startswith(_JOURNALED_TYPE):
            return
        if JOURNALED_TAG in (tags or ()):
            return  # inside a journaled tool: the tool's outcome is what is kept
        self._refuse(
            f"the model {_name(serialized, kw)} was called inside the graph without going "
            "through the journal: use the model build() was given (durable(model=...))"
        )

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._model(serialized, tags, **kwargs)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._model(serialized, tags, **kwargs)

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if JOURNALED_TAG in (tags or ()):
            return
        self._refuse(
            f"the tool {_name(serialized, kwargs)} ran inside the graph without going through "
            "the journal (a resume could run it again): use the tools build() was given"
        )

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if JOURNALED_TAG in (tags or ()):
            return
        self._refuse(
            f"the retriever {_name(serialized, kwargs)} read outside the journal: offer it "
            "to the model as a tool, or wrap the lookup in tether.integrations.step"
        )


def _name(serialized: dict[str, Any] | None, kwargs: dict[str, Any]) -> str:
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        return repr(name)
    named = (serialized or {}).get("name")
    if isinstance(named, str) and named:
        return repr(named)
    ids = (serialized or {}).get("id")
    if isinstance(ids, list) and ids:
        return repr(str(ids[-1]))
    return "(unnamed)"
