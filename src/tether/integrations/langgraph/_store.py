"""LangGraph's long-term store (``BaseStore``) on Tether's memory: ``TetherStore`` answers a
graph's ``store.get`` / ``put`` / ``search`` / ``list_namespaces`` from a
:class:`tether.Memory`, and inside a durable run each operation is a journaled step of the
run's turn (``memory.get``, ``memory.put``, ...), so a resume or a replay gets what the run
saw, even after the memory changed, with no call to the store or the embedding function.

Inside a journaled tool (a LangGraph tool given the store with ``InjectedStore``) they are
steps of the tool's call instead, numbered (``memory.get.1``, ...). Outside a durable run
(the application reading what its agents remembered) the operations go to the memory
directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from pydantic import JsonValue

from tether.engine import Memory, memory_text
from tether.integrations._bridge import NotInTurn, current_turn
from tether.integrations.langgraph._errors import refuse
from tether.integrations.langgraph._sync import on_the_loop
from tether.journal import ToolScope
from tether.store import MemoryItem

__all__ = ("TetherStore", "tool_steps")

Step = Callable[[str, Callable[[], Awaitable[JsonValue]]], Awaitable[JsonValue]]
_tool_step: ContextVar[Step | None] = ContextVar("tether_langgraph_tool_step", default=None)


@contextlib.contextmanager
def tool_steps(scope: ToolScope) -> Iterator[None]:
    """While a journaled tool runs: the store's operations are steps of its call (numbered,
    as a call keys its steps by name), so a tool retried or resumed is served them, and a
    replay, which serves the tool's outcome, finds none outside it."""
    numbers = itertools.count(1)

    async def step(name: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
        return await scope.step(f"{name}.{next(numbers)}", fn)

    token = _tool_step.set(step)
    try:
        yield
    finally:
        _tool_step.reset(token)


_FILTER_SCAN = 1_000
"""A search with a ``filter`` reads up to this many hits and filters them (no index on values)."""


class TetherStore(BaseStore):
    """A LangGraph ``BaseStore`` over :class:`tether.Memory`, journaled inside durable runs.

    Compile the graph with it (``graph.compile(store=TetherStore(memory))``); nodes use it as
    any LangGraph store (``runtime.store``, or a ``store: BaseStore`` parameter). A put's
    ``index`` picks the value's fields whose text is searched (``False``: none embedded);
    ``ttl`` is not supported (Tether's retention erases memory by namespace).

    Example::

        memory = tether.Memory(lambda: runtime.store, embed=embed)

        def build(model, tools):
            return StateGraph(MessagesState).add_node(...).compile(store=TetherStore(memory))
    """

    supports_ttl = False

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def _memory(self) -> Memory:
        in_tool = _tool_step.get()
        if in_tool is not None:
            return self.memory.journaled(in_tool)
        try:
            turn = current_turn()
        except NotInTurn:
            return self.memory
        return self.memory.journaled(turn.step)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return on_the_loop("store", lambda: self.abatch(list(ops)))
        refuse(
            "a sync store call in async code would block the event loop the journal answers "
            "on: await store.aget() / aput() / asearch() in an async node"
        )

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        memory = self._memory()
        return [await self._one(memory, op) for op in ops]

    async def _one(self, memory: Memory, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = await memory.get(op.namespace, op.key)
            return None if found is None else _item(found)
        if isinstance(op, PutOp):
            if op.value is None:
                await memory.delete(op.namespace, op.key)
                return None
            value = dict(op.value)
            fields = op.index if isinstance(op.index, list) else None
            text = memory_text(value if fields is None else [value.get(f) for f in fields])
            await memory.put(op.namespace, op.key, value, text=text, index=op.index is not False)
            return None
        if isinstance(op, SearchOp):
            return await self._search(memory, op)
        if isinstance(op, ListNamespacesOp):
            return await self._namespaces(memory, op)
        raise ValueError(f"unknown store operation: {type(op).__name__}")

    async def _search(self, memory: Memory, op: SearchOp) -> list[SearchItem]:
        if not op.filter:
            hits = await memory.search(
                op.namespace_prefix, op.query, limit=op.limit, offset=op.offset
            )
        else:
            found = await memory.search(op.namespace_prefix, op.query, limit=_FILTER_SCAN)
            wanted = op.filter
            hits = [
                hit
                for hit in found
                if isinstance(hit.item.value, dict)
                and all(hit.item.value.get(name) == value for name, value in wanted.items())
            ][op.offset : op.offset + op.limit]
        return [
            SearchItem(
                namespace=hit.item.namespace,
                key=hit.item.key,
                value=_value(hit.item),
                created_at=hit.item.created_at,
                updated_at=hit.item.updated_at,
                score=hit.score,
            )
            for hit in hits
        ]

    async def _namespaces(self, memory: Memory, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: Sequence[str] = ()
        suffix: tuple[str, ...] | None = None
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            if "*" in path:
                raise ValueError("a namespace condition with wildcards is not supported")
            if condition.match_type == "prefix":
                prefix = path
            else:
                suffix = path
        held = await memory.namespaces(prefix, limit=1000)
        if suffix is not None:
            held = [ns for ns in held if ns[len(ns) - len(suffix) :] == suffix]
        if op.max_depth is not None:
            held = list(dict.fromkeys(ns[: op.max_depth] for ns in held))
        return held[op.offset : op.offset + op.limit]


def _value(item: MemoryItem) -> dict[str, Any]:
    return item.value if isinstance(item.value, dict) else {"value": item.value}


def _item(item: MemoryItem) -> Item:
    return Item(
        value=_value(item),
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )
