"""Worker processes for the file tools: the work a model chooses never runs in the server.

**Why a process.** ``read``, ``write``, ``edit``, ``glob`` and ``grep`` do work whose size and
time a model chooses: a regular expression that backtracks, a glob over a huge tree, a file
on a stuck disk. Python's ``re`` holds the GIL for a whole match (a ``grep`` pattern held it
for 5-20 s, and no other session, request or lease renewal ran), and a thread cannot be
stopped. A worker process (``tether/tools/_worker.py``) shares no GIL with the server, can
be SIGKILLed at its deadline, and holds its own memory under an address-space limit. The
deadline bounds everything; RE2 (``tether/tools/_regex.py``) also makes most ``grep``
patterns linear-time, so that they finish rather than time out.

**The pool.** Starting a worker costs an interpreter and the tools' modules (0.2 s on a
loaded machine); a call to a warm one costs about what a thread's hand-off did (a small
``read``: 0.35 ms against 0.28 ms, medians). So workers are kept: a call takes an idle one
(or starts one), and gives it back when it answered; a worker killed at a deadline, cancelled
mid-call, or broken is never given back. At most ``IDLE`` wait idle, and at most ``RUNNING``
work at once per event loop (the others wait, inside their deadline). The pool is the
process's (workers are ``Popen`` objects, bound to no event loop); their pipes are read and
written without blocking, with the running loop's ``add_reader`` and ``add_writer``.

The deadline covers waiting for a worker, the work and the answer, not a worker's start
(bounded apart, by ``START_SECONDS``). A worker runs isolated (``python -I``) on the server's
``sys.path`` less its working directory, with none of its environment (its secrets), ``/``
as its directory, and its own session (a terminal's Ctrl-C is the server's to handle).
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import json
import os
import subprocess
import sys
import threading
import weakref
from collections.abc import Sequence
from dataclasses import astuple
from typing import Any

from pydantic import JsonValue

from tether.tools import _errors
from tether.tools._errors import EditMismatch, ToolTimedOut, WorkspaceError
from tether.tools._files import Limits
from tether.tools._paths import Root
from tether.tools._worker import READY

__all__ = (
    "IDLE",
    "MEMORY_FLOOR",
    "RUNNING",
    "START_SECONDS",
    "WorkerCalls",
    "WorkerPool",
    "WorkerTimedOut",
    "rebuilt",
    "shared_pool",
    "worker_command",
)

_START = """
import sys, types
tools = types.ModuleType("tether.tools")
tools.__path__ = [sys.argv[2]]
sys.modules["tether.tools"] = tools
sys.path[:] = sys.argv[3:]
from tether.tools._worker import main
main(int(sys.argv[1]))
"""
"""A worker's start, run by ``python -I -c``: isolated (no ``PYTHON*`` variables, no user
site, no working directory on the path), then the server's own path, so that it imports what
the server did. ``tether.tools`` stands as a bare package: the worker needs its plain modules,
not its public face, which imports the agent layer (a start took 1.3-2.3 s on a loaded
machine with it, 0.2 s without)."""
IDLE = 2
"""Workers kept waiting, started, for the next call."""
RUNNING = 8
"""Workers working at once per event loop; further calls wait for one to be free."""
START_SECONDS = 60.0
"""How long a worker may take to start (seconds on a loaded machine, not minutes)."""
MEMORY_FLOOR = 512 << 20
"""A worker's address space, beyond what its files take (Python, Tether, RE2: about 60 MiB)."""


class WorkerTimedOut(Exception):
    """The call's deadline passed; its worker, if it had one, was killed."""


class _Worker:
    """One worker process, its pipes read and written without blocking."""

    def __init__(self, command: Sequence[str]) -> None:
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd="/",
            env=_environment(),
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._to = self.process.stdin.fileno()
        self._from = self.process.stdout.fileno()
        os.set_blocking(self._to, False)
        os.set_blocking(self._from, False)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    async def started(self) -> None:
        """Until the worker said it is ready (it imported what it needs)."""
        if await self._line(len(READY)) != READY:
            raise WorkspaceError("the worker process did not start: it said something else")

    async def exchange(self, request: bytes, answer_limit: int) -> bytes:
        """Send one request line, read the one answer line."""
        loop = asyncio.get_running_loop()
        view = memoryview(request)
        while view:
            try:
                view = view[os.write(self._to, view) :]
            except BlockingIOError:
                await _ready(loop, self._to, writing=True)
            except BrokenPipeError:
                raise WorkspaceError(f"the worker process {self._ended()}") from None
        return await self._line(answer_limit)

    async def _line(self, limit: int) -> bytes:
        loop = asyncio.get_running_loop()
        line = bytearray()
        while not line.endswith(b"\n"):
            try:
                chunk = os.read(self._from, 1 << 16)
            except BlockingIOError:
                await _ready(loop, self._from, writing=False)
                continue
            if not chunk:
                raise WorkspaceError(f"the worker process {self._ended()}")
            line += chunk
            if len(line) > limit:
                raise WorkspaceError(
                    f"the answer was over its limit of {limit} bytes; the worker was stopped"
                )
        return bytes(line)

    def _ended(self) -> str:
        code = self.process.poll()
        if code is None:
            return "closed its pipe"
        return f"ended (signal {-code})" if code < 0 else f"ended (exit code {code})"

    def stop(self) -> None:
        """Ask an idle worker to end: the end of its input."""
        if self.process.stdin is not None:
            self.process.stdin.close()

    def kill(self) -> None:
        if self.alive:
            self.process.kill()

    def reaped(self) -> bool:
        """Whether it is gone and reaped; its pipes are closed then."""
        if self.alive:
            return False
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        return True


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, *, writing: bool) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if writing:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if writing:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def worker_command() -> tuple[str, ...]:
    """The command that starts a worker of this process: this Python, on this process's
    ``sys.path`` less its working directory (a workspace may be the server's working
    directory, and a file a model wrote there, ``json.py`` say, must not be what a worker
    imports), plus where Tether is."""
    here = os.getcwd()
    tools = os.path.dirname(os.path.abspath(__file__))
    path = [os.path.dirname(os.path.dirname(tools))]  # the folder holding the tether package
    for entry in sys.path:
        absolute = os.path.abspath(entry)
        if entry and absolute != here and absolute not in path:
            path.append(absolute)
    return (sys.executable, "-I", "-c", _START, str(os.getpid()), tools, *path)


def _environment() -> dict[str, str]:
    """Nothing of the server's environment (its secrets) but ``PATH``."""
    return {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}


class WorkerPool:
    """Worker processes, kept warm between calls (see the module's docstring).

    Example::

        pool = WorkerPool()
        answer = await pool.run(request, deadline=30.0, answer_limit=1 << 20)
        pool.close()
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        idle: int = IDLE,
        running: int = RUNNING,
    ) -> None:
        self.command = worker_command() if command is None else tuple(command)
        self.idle_kept = idle
        self.running = running
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._ending: list[_Worker] = []
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._slots = weakref.WeakKeyDictionary()

    def _idle_one(self) -> _Worker | None:
        with self._lock:
            self._reap()
            while self._idle:
                worker = self._idle.pop()
                if worker.alive:
                    return worker
                self._ending.append(worker)
        return None

    async def _start(self, timer: asyncio.Timeout) -> _Worker:
        """A new worker, once ready. Its start is not the call's work: the deadline is put
        off by the time it took (bounded on its own by ``START_SECONDS``)."""
        loop = asyncio.get_running_loop()
        due, began = timer.when(), loop.time()
        timer.reschedule(None)
        worker = _Worker(self.command)
        starting = asyncio.timeout(START_SECONDS)
        try:
            async with starting:
                await worker.started()
        except BaseException as exc:
            self._give_back(worker, False)
            if isinstance(exc, TimeoutError) and starting.expired():
                problem = f"the worker process did not start within {START_SECONDS:g} s"
                raise WorkspaceError(problem) from None
            raise
        timer.reschedule(None if due is None else due + loop.time() - began)
        return worker

    def _give_back(self, worker: _Worker, reusable: bool) -> None:
        with self._lock:
            if reusable and worker.alive and len(self._idle) < self.idle_kept:
                self._idle.append(worker)
                return
            if reusable:
                worker.stop()
            else:
                worker.kill()
            self._ending.append(worker)
            self._reap()

    def _reap(self) -> None:
        self._ending = [worker for worker in self._ending if not worker.reaped()]

    def _slot(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            slot = self._slots.get(loop)
            if slot is None:
                slot = self._slots[loop] = asyncio.Semaphore(self.running)
            return slot

    async def run(
        self, request: dict[str, JsonValue], *, deadline: float, answer_limit: int
    ) -> Any:
        """The worker's answer to ``request``: its value, or its error raised. Raises
        :class:`WorkerTimedOut` once ``deadline`` seconds have passed."""
        encoded = json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogatepass")
        timer = asyncio.timeout(deadline)
        worker: _Worker | None = None
        reusable = False
        try:
            async with timer, self._slot():
                worker = self._idle_one()
                if worker is None:
                    worker = await self._start(timer)
                line = await worker.exchange(encoded + b"\n", answer_limit)
            reply = json.loads(line.decode("utf-8", "surrogatepass"))
            reusable = not reply.get("end", False)
        except TimeoutError:
            if timer.expired():
                raise WorkerTimedOut from None
            raise
        finally:
            if worker is not None:
                self._give_back(worker, reusable)
        if "ok" in reply:
            return reply["ok"]
        raise rebuilt(reply["error"])

    def close(self) -> None:
        """End every idle worker (at the end of its input), and reap those ending."""
        with self._lock:
            idle, self._idle = self._idle, []
            for worker in idle:
                worker.stop()
            for worker in [*idle, *self._ending]:
                try:
                    worker.process.wait(5)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.process.wait()
                worker.reaped()
            self._ending = []


def rebuilt(error: dict[str, Any]) -> Exception:
    """The exception a worker reported, as the tool would have raised it in-process."""
    name, message = str(error["type"]), str(error["message"])
    if name == "EditMismatch":
        return EditMismatch(message, matches=int(error.get("matches", 0)))
    typed = getattr(_errors, name, None)
    if isinstance(typed, type) and issubclass(typed, WorkspaceError) and name in _errors.__all__:
        return typed(message)
    builtin = getattr(builtins, name, None)
    if isinstance(builtin, type) and issubclass(builtin, OSError):
        return builtin(message)
    return WorkspaceError(f"{name}: {message}")


_shared: tuple[int, WorkerPool] | None = None
_shared_lock = threading.Lock()


def shared_pool() -> WorkerPool:
    """The process's pool (a new one in a forked child: a parent's workers are not its own)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared[0] != os.getpid():
            pool = WorkerPool()
            atexit.register(pool.close)
            _shared = (os.getpid(), pool)
        return _shared[1]


_AFTER_TIMEOUT = {
    "read": "a slow or stuck file system?",
    "write": "the file is as it was or wholly written, never in part: read it to see which",
    "edit": "the file is as it was or wholly edited, never in part: read it to see which",
    "glob": "narrow the pattern or the path",
    "grep": "narrow the pattern, the path or the glob",
}


class WorkerCalls:
    """One workspace's calls to the shared pool: its root, caps and deadline.

    Example::

        calls = WorkerCalls(Root("."), limits, frozenset(), timeout=30.0)
        text = await calls.run("grep", "grep", pattern="TODO", path=".", glob=None,
                               ignore_case=False)
    """

    def __init__(
        self, root: Root, limits: Limits, ignore: frozenset[str], *, timeout: float
    ) -> None:
        self.timeout = timeout
        caps: list[JsonValue] = [*astuple(limits)]
        ignored: list[JsonValue] = [*sorted(ignore)]
        self._request: dict[str, JsonValue] = {
            "root": root.path,
            "limits": caps,
            "ignore": ignored,
            # What a file at the size cap takes, decoded and split, many times over.
            "memory": MEMORY_FLOOR + 32 * limits.file_bytes,
        }
        # An answer is text under the read or output cap; JSON escapes at most six-fold.
        self._answer_limit = 6 * max(limits.read_bytes, limits.output_bytes) + (64 << 10)

    async def run(self, tool: str, op: str, **arguments: JsonValue) -> JsonValue:
        """What the worker answered ``op`` (the work of ``tool``); its error raised, or
        :class:`ToolTimedOut` at the deadline."""
        request = {**self._request, "op": op, "args": arguments}
        try:
            value: JsonValue = await shared_pool().run(
                request, deadline=self.timeout, answer_limit=self._answer_limit
            )
        except WorkerTimedOut:
            raise ToolTimedOut(
                f"{tool} timed out after {self.timeout:g} s and was stopped; "
                f"{_AFTER_TIMEOUT[tool]}",
                tool=tool,
                timeout=self.timeout,
            ) from None
        return value

    async def text(self, tool: str, op: str, **arguments: JsonValue) -> str:
        value = await self.run(tool, op, **arguments)
        assert isinstance(value, str)
        return value
