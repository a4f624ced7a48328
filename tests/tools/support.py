"""Calling the workspace tools in tests: a context that records progress and steps, and the
tools' results as the model sees them (through the agent's ``Toolbox``)."""

from __future__ import annotations

import asyncio
import functools
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import JsonValue

from tether.agent import Tool, Toolbox, ToolContext
from tether.journal import ToolFailure, ToolScope
from tether.messages import ToolCall, ToolOutcomeStatus, ToolResult
from tether.tools import SandboxUnavailable, workspace
from tether.tools._pool import rebuilt
from tether.tools._worker import answer

from ..processes import eventually as blocking_eventually

SECRET = "the secret outside the workspace"


@dataclass
class Recorder:
    """A tool scope's effects, kept: ``progress`` texts, and ``steps`` by name (a step whose
    name is already recorded is served, as recovery does, instead of run)."""

    progress: list[str] = field(default_factory=list)
    steps: dict[str, JsonValue] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    on_progress: Callable[[str], None] | None = None

    async def _step(self, name: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
        if name in self.steps:
            return self.steps[name]
        self.runs.append(name)
        self.steps[name] = value = await fn()
        return value

    async def _progress(self, text: str) -> None:
        self.progress.append(text)
        if self.on_progress is not None:
            self.on_progress(text)

    def scope(self, key: str = "e1:c1") -> ToolScope:
        return ToolScope(
            conversation_id="conv",
            session="default",
            execution_id="e1",
            idempotency_key=key,
            step=self._step,
            progress=self._progress,
        )

    def context(self) -> ToolContext:
        scope = self.scope()
        return ToolContext(
            call_id="c1",
            idempotency_key=scope.idempotency_key,
            conversation_id=scope.conversation_id,
            session=scope.session,
            execution_id=scope.execution_id,
            scope=scope,
            progress_sink=scope.progress,
        )


class Tools:
    """``workspace(...)``'s tools by name, called directly (typed errors raise) or as the
    model calls them (:meth:`result`: errors are results)."""

    def __init__(self, tools: Sequence[Tool], recorder: Recorder | None = None) -> None:
        self.all = tuple(tools)
        self.by_name = {t.name: t for t in tools}
        self.recorder = recorder or Recorder()

    async def __call__(self, name: str, **args: Any) -> Any:
        return await self.by_name[name].call(args, self.recorder.context())

    async def result(self, name: str, **args: Any) -> ToolResult:
        call = ToolCall(call_id="c1", name=name, args=args, idempotency_key="e1:c1")
        try:
            return await Toolbox(self.all).execute(call, self.recorder.scope())
        except ToolFailure as failure:  # as the journal reports it to the model
            return ToolResult(
                call_id=call.call_id,
                content=failure.message,
                is_error=True,
                status=ToolOutcomeStatus.ERROR,
            )


class InProcess:
    """A stand-in for the pool of worker processes that does their work in this process, in
    a thread, where a test can patch the seams of ``_paths`` and ``_files`` (the race tests
    widen the window between a check and a use)."""

    async def run(
        self, request: dict[str, JsonValue], *, deadline: float, answer_limit: int
    ) -> Any:
        reply = await asyncio.to_thread(answer, request)
        if "ok" in reply:
            return reply["ok"]
        error = reply["error"]
        assert isinstance(error, dict)
        raise rebuilt(error)


def dead(pid: int) -> bool:
    """The process is gone, or a zombie nobody reaped yet (an orphan's reaper may be slow)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except ProcessLookupError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def wait_dead(pids: Sequence[int], seconds: float = 20.0) -> list[int]:
    """The pids still alive after a bounded wait (``[]`` when all died)."""
    deadline = time.monotonic() + seconds
    alive = [pid for pid in pids if not dead(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [pid for pid in alive if not dead(pid)]
    return alive


def pids_in(path: Path, count: int, seconds: float = 20.0) -> list[int]:
    """The pids a command wrote to ``path``, one a line, once ``count`` of them are there."""

    def written() -> list[int] | None:
        lines = path.read_text().split() if path.exists() else []
        return [int(line) for line in lines] if len(lines) >= count else None

    return blocking_eventually(written, f"{path} holding {count} pids", seconds=seconds)


def kill_quietly(pids: Sequence[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except (ProcessLookupError, PermissionError):
            pass


def real(path: Path) -> str:
    """``path`` with its links resolved (what a command's ``pwd`` and ``HOME`` show)."""
    return os.path.realpath(path)


def names(directory: Path, pattern: str = "*") -> list[str]:
    """The paths under ``directory`` matching ``pattern``, relative to it, sorted."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob(pattern))


@functools.cache
def sandbox_missing() -> str | None:
    """Why ``bash``'s sandbox cannot be made on this machine (``None``: it can)."""
    with tempfile.TemporaryDirectory() as scratch:
        try:
            workspace(scratch)
        except SandboxUnavailable as exc:
            return str(exc)
    return None


def pids_running(token: str) -> list[int]:
    """The host's processes with ``token`` in an argument (a sandbox's are among them: the
    host sees every PID namespace); zombies left out."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            arguments = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in arguments and not dead(int(entry)):
            found.append(int(entry))
    return found


def wait_gone(token: str, seconds: float = 20.0) -> list[int]:
    """The processes with ``token`` in an argument still alive after a bounded wait."""
    deadline = time.monotonic() + seconds
    alive = pids_running(token)
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = pids_running(token)
    return alive


GAP_BOUND = 0.5
"""The longest the event loop may go without a tick while a tool works. The issue asks for
under 50 ms, and the largest gap measured was 10-14 ms with two cores at a load average of
11; the bound is ten times the goal so that a loaded CI machine does not fail it, while a
blocked loop fails it by seconds (on main's code the GIL held by a match stopped it 20 s)."""


@asynccontextmanager
async def loop_gaps(tick: float = 0.001) -> AsyncIterator[list[float]]:
    """The gaps between the ticks of a task that sleeps ``tick`` at a time, while inside:
    a loop blocked for a while shows as one long gap (the last one runs to the exit)."""
    gaps: list[float] = []
    last = time.monotonic()

    async def tick_on() -> None:
        nonlocal last
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick_on())
    try:
        yield gaps
    finally:
        gaps.append(time.monotonic() - last)
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)


def worker_pids(parent: int | None = None) -> set[int]:
    """The pids of the live (not zombie) file-tool workers of ``parent`` (this process)."""
    parent = os.getpid() if parent is None else parent
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        state, ppid = stat.rpartition(")")[2].split()[:2]
        if int(ppid) == parent and state not in ("Z", "X") and b"_worker" in command:
            found.add(int(entry.name))
    return found


T = TypeVar("T")


async def eventually(check: Callable[[], T], seconds: float = 20.0) -> T:
    """``check()``'s first truthy value, asked every 10 ms for at most ``seconds``: for what
    another process does, which nothing in this one can await."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{check} never held within {seconds} s")
        await asyncio.sleep(0.01)


def environment_of(pid: int) -> dict[str, str]:
    """The environment a process started with."""
    entries = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    return dict(entry.partition("=")[::2] for entry in entries if entry)


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
