"""What a test waits for, awaited rather than slept for: an append to a log, an event the
runtime emits, or time passing on the test's :class:`ManualClock` (for what only time ends: a
lease, a wait's deadline, the sweep a lease apart)."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tether.engine import EngineEvent, ManualClock, Runtime
from tether.store import LogStore

T = TypeVar("T")
WAIT = 60
"""Seconds a wait may take: room for a loaded machine, under the per-test timeout."""


async def until_appended(
    store: LogStore, conversation_id: str, ready: Callable[[], Awaitable[T | None]]
) -> T:
    """``ready()``'s first answer that is not empty, asked again after each append to the
    conversation (``wait_for_append``): no polling, no sleeping. Whatever ``ready`` waits for
    must be committed with a record of this conversation."""
    head = 0
    async with asyncio.timeout(WAIT):
        while not (answer := await ready()):
            head = await store.wait_for_append(conversation_id, after_seq=head)
    return answer


async def until_emitted(runtime: Runtime, ready: Callable[[], Awaitable[T | None]]) -> T:
    """``ready()``'s first answer that is not empty, asked again after each event ``runtime``
    emits (an admission, a claim, a spawn, a park, a settlement each emit one once
    committed): no polling, no sleeping. For what no append of one conversation marks (a
    submission's status, its children, the gates of any session)."""
    emitted = asyncio.Event()

    def heard(event: EngineEvent) -> None:
        emitted.set()

    observers = runtime.instrumentation.observers
    observers.append(heard)
    try:
        async with asyncio.timeout(WAIT):
            while not (answer := await ready()):
                await emitted.wait()
                emitted.clear()
        return answer
    finally:
        observers.remove(heard)


async def advance_until(clock: ManualClock, done: Awaitable[T], step: float) -> T:
    """Move ``clock`` on ``step`` at a time until ``done`` is, and return its result. Between
    two moves the engine's tasks run (and wait on the store): ``done`` is awaited for a real
    moment each time, so time never races ahead of the work it is meant to pace."""
    task = asyncio.ensure_future(done)
    try:
        async with asyncio.timeout(WAIT):
            while not task.done():
                await clock.advance(step)
                await asyncio.wait({task}, timeout=0.01)
        return task.result()
    finally:
        task.cancel()
