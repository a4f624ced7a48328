"""Sync calls of a graph's plain-function nodes, journaled on the run's event loop.

LangGraph runs a node that is a plain function in a worker thread, with the run's context.
Its ``model.invoke(...)`` cannot await the turn there: the call is handed to the run's loop
as a task and the thread waits for the answer. When the run ends, whatever is still pending
is cancelled and awaited, so no call outlives its turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine
from contextvars import ContextVar, copy_context
from typing import Any, TypeVar

from tether.integrations._bridge import current_turn
from tether.integrations.langgraph._errors import refuse

__all__ = ("on_the_loop", "sync_calls")

T = TypeVar("T")


class _LoopBridge:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks: set[asyncio.Task[Any]] = set()  # touched on the loop's thread only
        self._closed = False

    def call(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``make()`` on the loop, from another thread; its result, or its exception."""
        answered: concurrent.futures.Future[T] = concurrent.futures.Future()
        context = copy_context()  # the node's: the turn, the run's refusals

        def start() -> None:
            if self._closed:
                answered.cancel()
                return
            task = self._loop.create_task(make(), context=context)
            self._tasks.add(task)
            task.add_done_callback(lambda done: self._settle(done, answered))

        self._loop.call_soon_threadsafe(start)
        return answered.result()

    def _settle(self, task: asyncio.Task[T], answered: concurrent.futures.Future[T]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            answered.cancel()
        elif (error := task.exception()) is not None:
            answered.set_exception(error)
        else:
            answered.set_result(task.result())

    async def aclose(self) -> None:
        self._closed = True
        pending = list(self._tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


_bridge: ContextVar[_LoopBridge | None] = ContextVar("tether_langgraph_loop", default=None)


@contextlib.asynccontextmanager
async def sync_calls() -> AsyncIterator[None]:
    """Lets the sync calls of the run this block drives reach its loop."""
    bridge = _LoopBridge(asyncio.get_running_loop())
    token = _bridge.set(bridge)
    try:
        yield
    finally:
        _bridge.reset(token)
        await bridge.aclose()


def on_the_loop(what: str, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``make()``'s result, awaited on the run's loop while this (worker) thread waits."""
    bridge = _bridge.get()
    if bridge is None:
        current_turn()  # outside a durable run: NotInTurn says so
        refuse(f"a sync {what} call reached no durable run's event loop")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return bridge.call(make)
    refuse(
        f"a sync {what} call (invoke or stream) in async code would block the event loop the "
        "journal answers on: await ainvoke() / astream() in an async node, or make the node a "
        "plain function (LangGraph runs it in a thread)"
    )
