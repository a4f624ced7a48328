"""NOTIFY → in-process wake-ups: one LISTEN connection per store, reconnecting on failure.

Appends, admissions and settlements in any process reach this one's waiters within a
round trip; polling stays as the fallback for the moments the connection is down.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg import sql

from tether._tasks import cancel_and_wait
from tether._urls import redact_url

__all__ = ("Listener",)

logger = logging.getLogger("tether.store.postgres")
_RETRY_SECONDS = 1.0


class Listener:
    """Runs ``handlers[channel](payload)`` for every notification on the channels wanted.

    A channel is listened to from the first time this process waits on it (:meth:`want`),
    not before: PostgreSQL delivers every notification to every backend listening on its
    channel, and an API node that never claims work has no use for one per admission.
    """

    def __init__(self, conninfo: str, handlers: Mapping[str, Callable[[str], None]]) -> None:
        self._conninfo = conninfo
        self._handlers = dict(handlers)
        self.own_backends: set[int] = set()
        """Backends of this process's pool: their notifications were delivered locally
        already, at commit, so their echo is skipped."""
        self._wanted: set[str] = set()
        self._more_wanted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def want(self, channel: str) -> None:
        """Listen on ``channel`` from now on. Until its ``LISTEN`` is in place, a round trip
        later, a notification is missed; every handler is then run with an empty payload,
        to look again."""
        if channel in self._wanted or self._closed:
            return
        self._wanted.add(channel)
        self._more_wanted.set()
        if self._task is None:
            # Started by whichever waiter comes first: not in that waiter's context (its
            # trace span, its turn), which the connection would otherwise carry for good.
            self._task = asyncio.create_task(
                self._run(), name="tether-postgres-listen", context=contextvars.Context()
            )

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as conn:
                    await self._listen(conn)
            except psycopg.Error as exc:
                reason = redact_url(str(exc))
                logger.warning("LISTEN connection lost (%s); polling until it is back", reason)
                await asyncio.sleep(_RETRY_SECONDS)

    async def _listen(self, conn: psycopg.AsyncConnection[Any]) -> None:
        listening: set[str] = set()
        while True:
            self._more_wanted.clear()
            added = self._wanted - listening
            for channel in sorted(added):
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            listening |= added
            self._wake_all()  # whatever was missed until now (or while disconnected): look again
            # Deliver until another channel is wanted: stopping the wait for notifications
            # leaves the connection idle, ready for the next LISTEN.
            delivering = asyncio.create_task(self._deliver(conn))
            wanted = asyncio.create_task(self._more_wanted.wait())
            try:
                await asyncio.wait({delivering, wanted}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                await cancel_and_wait(wanted)
                if not delivering.done():
                    await cancel_and_wait(delivering)
            if delivering.done() and not delivering.cancelled():
                delivering.result()  # the connection failed: raise it to reconnect

    async def _deliver(self, conn: psycopg.AsyncConnection[Any]) -> None:
        async for notice in conn.notifies():
            handler = self._handlers.get(notice.channel)
            if handler is not None and notice.pid not in self.own_backends:
                handler(notice.payload)

    def _wake_all(self) -> None:
        for handler in self._handlers.values():
            handler("")
