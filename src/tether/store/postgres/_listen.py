"""NOTIFY → in-process wake-ups: one LISTEN connection per store, reconnecting on failure.

Appends, admissions and settlements in any process reach this one's waiters within a
round trip; polling stays as the fallback for the moments the connection is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping

import psycopg
from psycopg import sql

from tether._tasks import cancel_and_wait

__all__ = ("Listener",)

logger = logging.getLogger("tether.store.postgres")
_RETRY_SECONDS = 1.0


class Listener:
    """Runs ``handlers[channel](payload)`` for every notification on its channels."""

    def __init__(self, conninfo: str, handlers: Mapping[str, Callable[[str], None]]) -> None:
        self._conninfo = conninfo
        self._handlers = dict(handlers)
        self.own_backends: set[int] = set()
        """Backends of this process's pool: their notifications were delivered locally
        already, at commit, so their echo is skipped."""
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def start(self) -> None:
        """Start listening; returns once the first LISTEN is in place."""
        self._task = asyncio.create_task(self._run(), name="tether-postgres-listen")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await self._ready.wait()

    async def close(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    for channel in self._handlers:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self._ready.set()
                    self._wake_all()  # whatever was missed while disconnected: look again
                    async for notice in conn.notifies():
                        handler = self._handlers.get(notice.channel)
                        if handler is not None and notice.pid not in self.own_backends:
                            handler(notice.payload)
            except psycopg.Error as exc:
                logger.warning("LISTEN connection lost (%s); polling until it is back", exc)
                self._ready.set()  # do not hold up a start: polling covers the gap
                await asyncio.sleep(_RETRY_SECONDS)

    def _wake_all(self) -> None:
        for handler in self._handlers.values():
            handler("")
