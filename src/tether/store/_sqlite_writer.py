"""The single SQLite writer: one connection on a dedicated thread, with group commit.

Writes from every conversation queue up here; the thread drains the queue and runs
the whole batch in one ``BEGIN IMMEDIATE`` transaction, each operation inside its own
savepoint. A failing operation (a ``Conflict``, say) rolls back its savepoint only, so
one writer's error never fails another's write in the same commit. Futures resolve
after ``COMMIT`` returns, so nothing is acknowledged before it is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tether.errors import StoreUnavailable

__all__ = ("SqliteWriter", "WriteOp")

T = TypeVar("T")
WriteOp = Callable[[sqlite3.Connection, list[str]], T]
"""A write: runs inside the transaction and lists the conversations it appended to."""

_MAX_BATCH = 512


@dataclass(slots=True)
class _Pending(Generic[T]):
    op: WriteOp[T]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    touched: list[str] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None


def _settle(pending: _Pending[Any]) -> None:
    if pending.future.done():  # the caller was cancelled; the write itself stands
        return
    if pending.error is not None:
        pending.future.set_exception(pending.error)
    else:
        pending.future.set_result(pending.result)


class SqliteWriter:
    """Owns the write connection; ``submit`` queues an operation and awaits its commit."""

    def __init__(
        self, conn: sqlite3.Connection, on_commit: Callable[[list[str]], None], name: str
    ) -> None:
        self._conn = conn
        self._on_commit = on_commit
        self._queue: queue.SimpleQueue[_Pending[Any] | None] = queue.SimpleQueue()
        self._closed = False
        self.commits = 0
        """Transactions committed so far (a batch of queued writes is one commit)."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    async def submit(self, op: WriteOp[T]) -> T:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        loop = asyncio.get_running_loop()
        pending: _Pending[T] = _Pending(op, loop, loop.create_future())
        self._queue.put(pending)
        return await pending.future

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)
        self._conn.close()

    # --- the writer thread ------------------------------------------------------------

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < _MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._commit(batch)
            touched = [cid for pending in batch if pending.error is None for cid in pending.touched]
            if touched:
                self._on_commit(touched)
            for pending in batch:
                with contextlib.suppress(RuntimeError):  # the caller's loop is closed
                    pending.loop.call_soon_threadsafe(_settle, pending)
            if stop:
                return

    def _commit(self, batch: list[_Pending[Any]]) -> None:
        conn = self._conn
        isolated = len(batch) > 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            for pending in batch:
                self._apply(conn, pending, isolated)
            conn.execute("COMMIT")
            self.commits += 1
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = StoreUnavailable(f"sqlite commit failed: {exc}")
            for pending in batch:
                if pending.error is None:
                    pending.error = error
                    pending.touched.clear()
        except BaseException as exc:
            # A single-operation batch without a savepoint: its error aborts the transaction.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            batch[0].error = exc
            batch[0].touched.clear()

    @staticmethod
    def _apply(conn: sqlite3.Connection, pending: _Pending[Any], isolated: bool) -> None:
        if not isolated:
            pending.result = pending.op(conn, pending.touched)
            return
        conn.execute("SAVEPOINT op")
        try:
            pending.result = pending.op(conn, pending.touched)
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK TO op")
            pending.error = StoreUnavailable(f"sqlite write failed: {exc}")
        except Exception as exc:
            conn.execute("ROLLBACK TO op")
            pending.error = exc
        conn.execute("RELEASE op")
        if pending.error is not None:
            pending.touched.clear()
