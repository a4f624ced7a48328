"""The single SQLite writer: one connection, its own thread, and group commit.

Writes from every conversation queue up here; the thread drains the queue and runs
the whole batch in one ``BEGIN IMMEDIATE`` transaction. Consecutive appends are
checked and inserted together (:mod:`._sqlite_append`); every other operation runs in
its own savepoint, so one caller's error (a ``Conflict``, say) never fails another's
write in the same commit. Futures resolve only after ``COMMIT`` returns, so nothing
is acknowledged before it is durable.

With ``inline=True`` (the store's default) writes are gathered on the caller's event loop
instead: every write a loop iteration issues joins one batch, and a callback at the next
iteration commits the batch on the loop's thread when the writer is idle (nothing queued,
nothing committing) and so is the loop (no other callback due: the fsync would hold them
up, where on the thread it overlaps them). That is group commit without the two thread
hand-offs of a commit, and without the GIL contention between them; on a virtual machine a
hand-off can cost more than the fsync itself. The loop is blocked for the commit's fsync,
so the writer keeps a moving average of how long its ``COMMIT`` takes and, while that
passes :data:`INLINE_COMMIT_LIMIT` (a slow disk), sends every batch to the thread.
Anything queued is still committed first, in order, and a write lock held by another
process is waited for on the thread, never inline.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tether._failpoints import ARMED, hit_sync
from tether.errors import StoreUnavailable
from tether.records import Record
from tether.store._sqlite_append import Appender, AppendRequest

__all__ = ("INLINE_COMMIT_LIMIT", "SqliteWriter", "WriteOp")

T = TypeVar("T")
WriteOp = Callable[[sqlite3.Connection, list[str]], T]
"""A write: runs inside the transaction and lists the conversations it appended to."""

_MAX_BATCH = 1024
INLINE_COMMIT_LIMIT = 0.002
"""Seconds: while commits average longer, batches commit on the writer thread, not the loop's."""
_COMMIT_AVERAGE_WEIGHT = 0.2  # of the latest commit in the moving average


@dataclass(slots=True)
class _Pending(Generic[T]):
    op: WriteOp[T] | AppendRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    touched: list[str] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None


def _settle(batch: list[_Pending[Any]]) -> None:
    for pending in batch:
        if pending.future.done():  # the caller was cancelled; the write itself stands
            continue
        if pending.error is not None:
            pending.future.set_exception(pending.error)
        else:
            pending.future.set_result(pending.result)


def _disk_failure(name: str) -> BaseException:
    return sqlite3.OperationalError("disk I/O error")


def _has_other_work(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether callbacks besides the running one are due on ``loop``: asyncio's own loops keep
    them in ``_ready``; a loop without one (uvloop) counts as idle."""
    return bool(getattr(loop, "_ready", None))


class SqliteWriter:
    """Owns the write connection; ``submit`` queues an operation and awaits its commit."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        on_commit: Callable[[list[str]], None],
        name: str,
        *,
        inline: bool = False,
    ) -> None:
        self._conn = conn
        self._on_commit = on_commit
        self._inline = inline
        self._busy_timeout_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
        if inline:
            # An inline commit must never wait on the loop: the connection does not wait
            # unless the writer thread, which may, asks it to (see ``_begin``).
            conn.execute("PRAGMA busy_timeout=0")
        self._appender = Appender()
        self._queue: queue.SimpleQueue[_Pending[Any] | None] = queue.SimpleQueue()
        self._connection_lock = threading.Lock()  # held for a whole transaction
        self._count_lock = threading.Lock()
        self._outstanding = 0  # writes handed to the thread and not yet committed
        self._closed = False
        self._gathering: dict[asyncio.AbstractEventLoop, list[_Pending[Any]]] = {}
        self._commit_seconds = 0.0  # moving average of COMMIT's duration
        self.commits = 0
        """Transactions committed so far (a batch of queued writes is one commit)."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    async def submit(self, op: WriteOp[T]) -> T:
        """A write's result once it is committed (or its error)."""
        result: T = await self._enqueue(op)
        return result

    async def append(self, request: AppendRequest) -> list[Record]:
        """An append's sealed records once they are committed."""
        records: list[Record] = await self._enqueue(request)
        return records

    def _enqueue(self, op: WriteOp[Any] | AppendRequest) -> asyncio.Future[Any]:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        loop = asyncio.get_running_loop()
        pending: _Pending[Any] = _Pending(op, loop, loop.create_future())
        gathered = self._gathering.get(loop)
        if gathered is not None:  # this iteration's batch: order kept, whatever happens to it
            gathered.append(pending)
        elif self._inline and self._commit_seconds < INLINE_COMMIT_LIMIT:
            self._gathering[loop] = [pending]
            loop.call_soon(self._commit_gathered, loop)
        else:
            self._hand_over([pending])
        return pending.future

    def _hand_over(self, batch: list[_Pending[Any]]) -> None:
        """Queue writes for the writer thread, in order."""
        with self._count_lock:
            self._outstanding += len(batch)
        for pending in batch:
            self._queue.put(pending)

    def _commit_gathered(self, loop: asyncio.AbstractEventLoop, *, closing: bool = False) -> None:
        batch = self._gathering.pop(loop, None)
        if not batch:
            return
        if self._closed and not closing:  # gathered on another loop while the store closed
            for pending in batch:
                pending.error = StoreUnavailable("the store is closed")
            _settle(batch)
            return
        if _has_other_work(loop) or not self._connection_lock.acquire(blocking=False):
            # Other callbacks are due (the fsync would hold them up: on the thread it overlaps
            # them), or the thread is committing and takes these next.
            self._hand_over(batch)
            return
        try:
            with self._count_lock:
                queued = self._outstanding > 0  # a queued write must commit first
            # Another process holding the write lock is waited for on the thread, too.
            begun = not queued and self._begin_without_waiting()
            if begun:
                try:
                    self._finish(batch, begun=True)
                finally:
                    _settle(batch)  # whatever happened, no caller is left waiting
        finally:
            self._connection_lock.release()
        if not begun:
            self._hand_over(batch)

    def _begin_without_waiting(self) -> bool:
        try:
            self._conn.execute("BEGIN IMMEDIATE")  # the connection does not wait (inline)
            return True
        except sqlite3.Error:  # busy (or worse): the writer thread will wait, or report it
            return False

    def _begin(self) -> None:
        """Begin on the writer thread, waiting up to the busy timeout for another process."""
        conn = self._conn
        if not self._inline:
            conn.execute("BEGIN IMMEDIATE")
            return
        conn.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.execute("PRAGMA busy_timeout=0")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # This loop's last batch commits before the thread is told to stop.
        self._commit_gathered(asyncio.get_running_loop(), closing=True)
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)
        self._conn.close()

    # --- the writer thread ------------------------------------------------------------

    def _run(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < _MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            with self._connection_lock:
                self._finish(batch)
            with self._count_lock:
                self._outstanding -= len(batch)
            # One wake-up per event loop per commit, not one per write.
            by_loop: dict[asyncio.AbstractEventLoop, list[_Pending[Any]]] = {}
            for pending in batch:
                by_loop.setdefault(pending.loop, []).append(pending)
            for loop, pendings in by_loop.items():
                with contextlib.suppress(RuntimeError):  # that loop is already closed
                    loop.call_soon_threadsafe(_settle, pendings)

    def _finish(self, batch: list[_Pending[Any]], *, begun: bool = False) -> None:
        self._commit(batch, begun=begun)
        touched = [cid for pending in batch if pending.error is None for cid in pending.touched]
        if touched:
            self._on_commit(touched)

    def _commit(self, batch: list[_Pending[Any]], *, begun: bool) -> None:
        conn = self._conn
        raising: _Pending[Any] | None = None  # the operation being applied, if one is
        try:
            if not begun:
                self._begin()
            start = 0
            while start < len(batch):
                end = start
                while end < len(batch) and isinstance(batch[end].op, AppendRequest):
                    end += 1
                if end > start:
                    self._apply_appends(conn, batch[start:end])
                    start = end
                else:
                    self._appender.forget()  # the operation may change any conversation
                    raising = batch[start]
                    self._apply(conn, raising, isolated=len(batch) > 1)
                    raising = None
                    start += 1
            if ARMED:  # failpoint sqlite.commit (docs/testing.md): the disk fails the COMMIT
                hit_sync("sqlite.commit", error=_disk_failure)
            began = time.perf_counter()
            conn.execute("COMMIT")
            self._commit_seconds += _COMMIT_AVERAGE_WEIGHT * (
                time.perf_counter() - began - self._commit_seconds
            )
            self.commits += 1
            self._appender.committed()
        except BaseException as exc:
            self._appender.forget()
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            # Nothing of the batch is durable, so no writer in it may hear "done": the one
            # whose operation raised gets its own error, every other one that it was undone.
            if isinstance(exc, sqlite3.Error):
                undone = StoreUnavailable(f"sqlite commit failed: {exc}")
            else:
                undone = StoreUnavailable(f"sqlite commit rolled back: {exc!r}")
            for pending in batch:
                own = exc if pending is raising and not isinstance(exc, sqlite3.Error) else None
                pending.error = pending.error or own or undone
                pending.result = None
                pending.touched.clear()

    def _apply_appends(self, conn: sqlite3.Connection, run: list[_Pending[Any]]) -> None:
        requests = [pending.op for pending in run]
        self._appender.append_all(conn, requests)  # type: ignore[arg-type]
        for pending, request in zip(run, requests, strict=True):
            assert isinstance(request, AppendRequest)
            pending.result, pending.error, pending.touched = (
                request.result,
                request.error,
                request.touched,
            )

    @staticmethod
    def _apply(conn: sqlite3.Connection, pending: _Pending[Any], *, isolated: bool) -> None:
        op = pending.op
        assert not isinstance(op, AppendRequest)
        if not isolated:
            pending.result = op(conn, pending.touched)
            return
        conn.execute("SAVEPOINT op")
        try:
            pending.result = op(conn, pending.touched)
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK TO op")
            pending.error = StoreUnavailable(f"sqlite write failed: {exc}")
        except Exception as exc:
            conn.execute("ROLLBACK TO op")
            pending.error = exc
        conn.execute("RELEASE op")
        if pending.error is not None:
            pending.touched.clear()
