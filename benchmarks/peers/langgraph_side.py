"""LangGraph's side: a ``StateGraph`` model ↔ tool loop with an ``add_messages`` reducer,
checkpointed by ``SqliteSaver`` with ``durability="sync"`` (each superstep's checkpoint is
committed before the next superstep runs)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from benchmarks.peers._fake import TEXT, TurnsResult, messages_in, reply, sqlite_bytes, tool_result

__all__ = ("DURABILITY", "available", "build_log", "latency", "resume", "run_turns")

DURABILITY = 'SqliteSaver, durability="sync": WAL (set by the saver), synchronous=FULL'


def available() -> bool:
    try:
        import langgraph.checkpoint.sqlite
        import langgraph.graph  # noqa: F401
    except ImportError:
        return False
    return True


def _graph(saver: Any) -> Any:
    from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    # The functional form, so the annotations are evaluated here, where the imports are.
    State = TypedDict(  # noqa: UP013
        "State",
        {"messages": Annotated[list[AnyMessage], add_messages], "turns": int, "done": int},
    )

    def model(state: dict[str, Any]) -> dict[str, Any]:
        text, call = reply(state.get("done", 0), state["turns"])
        if call is None:
            return {"messages": [AIMessage(content=text)]}
        calls = [{"name": "lookup", "args": {"n": call}, "id": f"c{call}", "type": "tool_call"}]
        return {"messages": [AIMessage(content=text, tool_calls=calls)]}

    def tool(state: dict[str, Any]) -> dict[str, Any]:
        [call] = state["messages"][-1].tool_calls
        result = ToolMessage(content=tool_result(call["args"]["n"]), tool_call_id=call["id"])
        return {"messages": [result], "done": state.get("done", 0) + 1}

    def route(state: dict[str, Any]) -> str:
        return "tool" if state["messages"][-1].tool_calls else END

    builder: Any = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tool", tool)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tool", END])
    builder.add_edge("tool", "model")
    return builder.compile(checkpointer=saver)


def _saver(db: Path) -> tuple[Any, sqlite3.Connection]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(db, check_same_thread=False)
    conn.execute("PRAGMA synchronous=FULL")  # SQLite's default, made explicit
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn


def _conversation(graph: Any, thread: str, turns: int) -> None:
    from langchain_core.messages import HumanMessage

    config = {"configurable": {"thread_id": thread}, "recursion_limit": 2 * turns + 10}
    state = graph.invoke(
        {"messages": [HumanMessage(content=TEXT)], "turns": turns, "done": 0},
        config,
        durability="sync",
    )
    assert len(state["messages"]) == messages_in(turns), len(state["messages"])


def run_turns(directory: Path, turns: int, reps: int) -> TurnsResult:
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / "langgraph.db"
    saver, conn = _saver(db)
    graph = _graph(saver)
    before = sqlite_bytes(db)
    seconds = []
    for rep in range(reps):
        start = time.perf_counter()
        _conversation(graph, f"t{turns}-{rep}", turns)
        seconds.append(time.perf_counter() - start)
    conn.close()
    return TurnsResult(turns, seconds, sqlite_bytes(db) - before, reps)


def latency(directory: Path, samples: int) -> list[float]:
    """A 1-turn conversation on a new thread: ``invoke`` until it returns (no queue: the
    caller runs the graph itself)."""
    directory.mkdir(parents=True, exist_ok=True)
    saver, conn = _saver(directory / "langgraph.db")
    graph = _graph(saver)
    times = []
    for n in range(samples + 5):
        start = time.perf_counter()
        _conversation(graph, f"latency-{n}", 1)
        if n >= 5:
            times.append((time.perf_counter() - start) * 1000)
    conn.close()
    return times


def build_log(directory: Path, turns: int) -> int:
    """A thread whose latest checkpoint holds a conversation of ``turns`` turns (written in one
    ``update_state``: resuming reads only the latest checkpoint). Returns its messages."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    directory.mkdir(parents=True, exist_ok=True)
    saver, conn = _saver(directory / "langgraph.db")
    graph = _graph(saver)
    messages: list[Any] = [HumanMessage(content=TEXT, id="u")]
    for n in range(turns):
        calls = [{"name": "lookup", "args": {"n": n}, "id": f"c{n}", "type": "tool_call"}]
        messages.append(AIMessage(content=TEXT, tool_calls=calls, id=f"a{n}"))
        messages.append(ToolMessage(content=tool_result(n), tool_call_id=f"c{n}", id=f"t{n}"))
    messages.append(AIMessage(content=TEXT, id="final"))
    config = {"configurable": {"thread_id": "resume"}}
    graph.update_state(config, {"messages": messages, "turns": turns, "done": turns}, "model")
    conn.close()
    return len(messages)


def resume(directory: Path) -> tuple[float, int]:
    """Cold resume (run in a fresh process, the graph compiled beforehand): connect, then run
    the first turn after it: ``invoke`` of one more turn (a tool call, its result, the final
    answer) on the thread, which loads its latest checkpoint, every superstep's checkpoint
    committed (``durability="sync"``). Returns (ms, messages before the turn)."""
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    graph = _graph(InMemorySaver())  # compiled outside the timed part; the saver swapped in
    config = {"configurable": {"thread_id": "resume"}, "recursion_limit": 20}
    start = time.perf_counter()
    conn = sqlite3.connect(directory / "langgraph.db", check_same_thread=False)
    conn.execute("PRAGMA synchronous=FULL")
    graph.checkpointer = SqliteSaver(conn)
    # "turns" and "done" count this invocation's tool calls, as in a conversation of its own.
    state = graph.invoke(
        {"messages": [HumanMessage(content=TEXT)], "turns": 1, "done": 0},
        config,
        durability="sync",
    )
    elapsed = (time.perf_counter() - start) * 1000
    conn.close()
    return elapsed, len(state["messages"]) - messages_in(1)
