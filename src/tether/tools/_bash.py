"""``bash``: one command, ``bash -c`` in its own process group, under a timeout; in a
``bwrap`` sandbox (``tools/_sandbox.py``) unless the workspace opted out.

The command string goes to ``bash -c`` as one argument (never ``shell=True``): it is a bash
program by design, which is the whole point of the tool. What is controlled is everything
around it:

- **The sandbox** (the default): the command runs in ``bwrap``'s namespaces, sees only the
  workspace (read-write) and the system's programs (read-only), and is bounded per process
  (see ``tools/_sandbox.py``). ``bwrap`` is the process started here; killing it kills the
  whole sandbox. It reports a command killed by signal N as exit code 128 + N, the way
  shells do, and so is it read back (an ``exit 139`` reads as SIGSEGV).
- **Its own session and process group** (``start_new_session=True``). On timeout the whole
  group gets SIGTERM, then SIGKILL once the grace period is over; when the command ends
  normally, whatever it left running in its group is ended the same way. The leader is
  waited for with ``waitid(WNOWAIT)`` and reaped only after its group was signalled, so its
  pid (the group's id) cannot be reused by another process while the group is signalled
  (where ``os.waitid`` is missing, the leader is reaped at once: a weaker guarantee).
  Unsandboxed, a process that leaves the group (``setsid``, a daemon) escapes this; in the
  sandbox, the PID namespace catches it.
- **A scrubbed environment**: ``PATH`` (the sandbox's, or the worker's passed on
  unsandboxed: commands need it and it is no secret), ``HOME`` set to the workspace root,
  ``LANG=C.UTF-8``, ``TERM=dumb``, and what the workspace was given as ``env``. Nothing
  else of the parent's environment (API keys, tokens) reaches the command; unsandboxed, it
  can still read the worker's ``/proc/<pid>/environ``. stdin is ``/dev/null``; the working
  directory is the root.
- **Its output** (stdout and stderr merged, in order) is streamed as tool progress as it
  arrives, and capped: the result keeps the first and the last half of the cap and says how
  much was left out between them; progress stops at the cap.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tether.tools._errors import WorkspaceError
from tether.tools._sandbox import Sandbox

__all__ = ("BashResult", "run_bash", "scrubbed_env")

Progress = Callable[[str], Awaitable[None]]
_CHUNK = 64 * 1024
_CLEANUP_SECONDS = 15.0  # above PidsCgroup.remove's own bound


def scrubbed_env(
    root: str, extra: Mapping[str, str] | None = None, *, path: str | None = None
) -> dict[str, str]:
    """The whole environment a command gets: a short allowlist, plus ``extra``. ``PATH`` is
    ``path``, or the worker's own."""
    env = {
        "PATH": path or os.environ.get("PATH") or os.defpath,
        "HOME": root,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    env.update(extra or {})
    return env


@dataclass(frozen=True, slots=True)
class BashResult:
    output: str
    status: str  # "exit code 0", "killed by signal SIGSEGV", "timed out"
    exit_code: int | None
    timed_out: bool
    total_bytes: int
    omitted_bytes: int

    def render(self) -> str:
        body = self.output if self.output.endswith("\n") or not self.output else self.output + "\n"
        return f"{body}[{self.status}]" if self.output else f"[no output; {self.status}]"


class _Output:
    """The command's output: the head and tail of it kept, progress streamed up to the cap."""

    def __init__(self, limit: int, progress: Progress | None) -> None:
        self.head_cap = limit // 2
        self.tail_cap = limit - self.head_cap
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.streamed = 0
        self.progress = progress
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    async def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        self.head += chunk[:room] if room > 0 else b""
        if len(chunk) > room:
            self.tail += chunk[max(room, 0) :]
            del self.tail[: max(0, len(self.tail) - self.tail_cap)]
        if self.progress is None or self.streamed >= self.limit:
            return
        part = chunk[: self.limit - self.streamed]
        self.streamed += len(part)
        text = self.decoder.decode(part, final=self.streamed >= self.limit)
        if self.streamed >= self.limit:
            text += f"\n[output over {self.limit} bytes: no more is streamed]\n"
        if text:
            await self.progress(text)

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        if not self.omitted:
            return bytes(self.head + self.tail).decode("utf-8", errors="replace")
        tail = bytes(self.tail)
        skip = 0
        while skip < min(3, len(tail)) and tail[skip] & 0xC0 == 0x80:
            skip += 1  # a character cut at the seam
        return (
            bytes(self.head).decode("utf-8", errors="replace")
            + f"\n[... {self.omitted} bytes of output left out ...]\n"
            + tail[skip:].decode("utf-8", errors="replace")
        )


class _Group:
    """The command's process group, and a thread that sees its leader exit without reaping
    it (``WNOWAIT``); the leader is reaped once :meth:`release` says the group was dealt with."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        loop: asyncio.AbstractEventLoop,
        cleanup: Callable[[], object] | None = None,
    ) -> None:
        self.process = process
        self._cleanup = cleanup
        self.pgid = process.pid  # the session leader's pid is its group's id
        self.exited: asyncio.Future[int | None] = loop.create_future()
        """The leader's exit: a return code as ``Popen`` has them (``-N``: signal N), or
        ``None`` when something else reaped it."""
        self.finished: asyncio.Future[None] = loop.create_future()
        """Set once the leader was reaped and ``cleanup`` ran."""
        self._released = threading.Event()
        threading.Thread(
            target=self._watch, args=(loop,), name=f"tether-bash-{process.pid}", daemon=True
        ).start()

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        status: int | None = None
        waitid = getattr(os, "waitid", None)
        try:
            if waitid is None:  # no waitid (some BSDs): reaped at once, the weaker guarantee
                status = self.process.wait()
            else:
                info = waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOWAIT)
                if info is not None:
                    exited = info.si_code == os.CLD_EXITED
                    status = info.si_status if exited else -info.si_status
        except ChildProcessError:  # reaped by someone else
            pass
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            loop.call_soon_threadsafe(self._exited, status)
        self._released.wait()
        with contextlib.suppress(ChildProcessError):
            self.process.wait()
        if self._cleanup is not None:
            self._cleanup()
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._finish)

    def _finish(self) -> None:
        if not self.finished.done():
            self.finished.set_result(None)

    def _exited(self, status: int | None) -> None:
        if not self.exited.done():
            self.exited.set_result(status)

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def release(self) -> None:
        self._released.set()


def _signalled(code: int | None) -> int | None:
    """A sandbox's exit code read back as ``Popen`` has them: 128 + N is signal N."""
    if code is not None and 128 < code < 128 + signal.NSIG:
        return -(code - 128)
    return code


def _status(code: int | None, sandbox: Sandbox | None, time_limit: float) -> str:
    if code is None:
        return "exit status unknown"
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = str(-code)
    status = f"killed by signal {name}"
    if sandbox is not None and -code == signal.SIGXCPU:
        status += f": over its CPU time limit of {sandbox.cpu_seconds(time_limit)} s"
    elif sandbox is not None and -code == signal.SIGXFSZ:
        status += f": a file over the size limit of {sandbox.limits.file_bytes} bytes"
    return status


async def _within(futures: set[asyncio.Future[Any]], seconds: float) -> bool:
    """Whether every one of ``futures`` is done within ``seconds`` (none is cancelled)."""
    _, pending = await asyncio.wait(futures, timeout=max(seconds, 0.0))
    return not pending


async def run_bash(
    command: str,
    *,
    cwd: str,
    env: Mapping[str, str],
    time_limit: float,
    output_limit: int,
    kill_grace: float,
    progress: Progress | None = None,
    sandbox: Sandbox | None = None,
) -> BashResult:
    """Run ``command`` with ``bash -c``, in ``sandbox`` unless it is ``None`` (see the
    module's docstring)."""
    if "\x00" in command:
        raise WorkspaceError("the command contains a NUL byte")
    if sandbox is not None:
        launch = sandbox.launch(command, env, time_limit)
        argv, cleanup = launch.argv, launch.cleanup
    else:
        bash = shutil.which("bash", path=env.get("PATH"))
        if bash is None:
            raise WorkspaceError("bash is not installed (not found on PATH)")
        argv, cleanup = [bash, "-c", command], None
    loop = asyncio.get_running_loop()
    # Popen, not asyncio's subprocesses: the leader must be reaped only after its group was
    # signalled (see _Group), which asyncio's child watchers do not allow. Its fork is short.
    # bwrap is given the command's environment only: its init's environ is readable inside.
    try:
        process = subprocess.Popen(  # noqa: ASYNC220
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    except BaseException:
        if cleanup is not None:
            cleanup()
        raise
    group = _Group(process, loop, cleanup)
    output = _Output(output_limit, progress)
    reader = asyncio.StreamReader(limit=_CHUNK)
    transport: asyncio.BaseTransport | None = None
    timed_out = False
    try:
        assert process.stdout is not None
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), process.stdout
        )

        async def pump() -> None:
            while chunk := await reader.read(_CHUNK):
                await output.add(chunk)

        pumping = asyncio.ensure_future(pump())
        try:
            timed_out = not await _within({group.exited}, time_limit)
            # The group goes, whether the leader timed out or left children behind: SIGTERM,
            # then SIGKILL once the leader is gone and the output closed, or the grace is up.
            group.signal(signal.SIGTERM)
            await _within({group.exited, pumping}, kill_grace)
            group.signal(signal.SIGKILL)
            # A process that left the group may hold the pipe open: stop reading after a grace.
            await _within({group.exited, pumping}, kill_grace)
        finally:
            pumping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pumping
    finally:
        group.signal(signal.SIGKILL)
        group.release()
        if transport is not None:
            transport.close()
        elif process.stdout is not None:
            process.stdout.close()
    # What the sandbox leaves to undo (its cgroup) is undone before the call returns, so a
    # worker that exits next leaves nothing behind (a cancelled call leaves it to the thread).
    await _within({group.finished}, _CLEANUP_SECONDS)
    if timed_out:
        status, code = f"timed out after {time_limit:g} s; its process group was killed", None
    elif group.exited.done():
        code = group.exited.result()
        code = _signalled(code) if sandbox is not None else code
        status = _status(code, sandbox, time_limit)
    else:
        status, code = "did not end after SIGKILL", None
    return BashResult(
        output=output.text(),
        status=status,
        exit_code=code,
        timed_out=timed_out,
        total_bytes=output.total,
        omitted_bytes=output.omitted,
    )
