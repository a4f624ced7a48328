"""Child processes for tests: start them, wait until they answer, and always reap them.

A ``Popen`` collected while its child still runs, or with a pipe left open, emits a
``ResourceWarning``; under ``filterwarnings = error`` that fails whichever test happens to run
when the garbage collector gets to it, not the test that leaked it. So every process a test
starts goes through :func:`start`, and the autouse fixture in ``tests/conftest.py`` reaps
whatever a test left running (:func:`reap_started`), even when it failed half-way.

Bounds are generous: on a loaded machine (two cores shared with other work) a server takes
seconds, not milliseconds, to import and bind. The per-test timeout (120 s) stays above them.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

__all__ = (
    "READY_SECONDS",
    "STOP_SECONDS",
    "eventually",
    "eventually_awaited",
    "free_port",
    "kill",
    "log_text",
    "reap",
    "reap_started",
    "start",
    "wait_ready",
    "wait_ready_blocking",
)

#: How long a starting server may take to answer ``/readyz``.
READY_SECONDS = 60.0
#: How long a process may take to exit after SIGTERM before it gets SIGKILL.
STOP_SECONDS = 20.0

_started: list[subprocess.Popen[Any]] = []
T = TypeVar("T")


def eventually(
    check: Callable[[], T | None], what: str | Callable[[], str], *, seconds: float = READY_SECONDS
) -> T:
    """``check()``'s first answer that is not empty, asked every 50 ms; fails saying ``what``
    (or what it returns: a server's log, say) after ``seconds``. For what another process
    does (a server's state, read over HTTP or from its files): nothing here can await it."""
    deadline = time.monotonic() + seconds
    while not (answer := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what if isinstance(what, str) else what()}")
        time.sleep(0.05)
    return answer


async def eventually_awaited(
    check: Callable[[], Awaitable[T | None]],
    what: str | Callable[[], str],
    *,
    seconds: float = READY_SECONDS,
) -> T:
    """:func:`eventually` for a check that is a coroutine (a store's read of what another
    process, or a database server on its behalf, did), asked every 50 ms."""
    deadline = time.monotonic() + seconds
    while not (answer := await check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what if isinstance(what, str) else what()}")
        await asyncio.sleep(0.05)
    return answer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_text(log: Path | None) -> str:
    return log.read_text(errors="replace") if log is not None and log.exists() else ""


def start(
    command: Sequence[str], *, outlives_test: bool = False, **options: Any
) -> subprocess.Popen[Any]:
    """``subprocess.Popen(command, **options)``, remembered so the test's teardown reaps it;
    with ``outlives_test``, not: a module's fixture shares it, and reaps it itself."""
    process: subprocess.Popen[Any] = subprocess.Popen(list(command), **options)
    if not outlives_test:
        _started.append(process)
    return process


def _close_pipes(process: subprocess.Popen[Any]) -> None:
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def kill(process: subprocess.Popen[Any]) -> None:
    """SIGKILL ``process`` (if it still runs), wait for it and close its pipes."""
    if process.poll() is None:
        process.kill()  # SIGKILL also ends a SIGSTOPped process
    process.wait(STOP_SECONDS)
    _close_pipes(process)


def reap(process: subprocess.Popen[Any], *, grace: float = STOP_SECONDS) -> None:
    """Stop ``process``: SIGTERM, SIGKILL if it is still running after ``grace`` seconds;
    then wait for it and close its pipes. Harmless on a process that already exited."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    kill(process)


def reap_started() -> None:
    """Kill and reap every process :func:`start` started that is still unreaped."""
    while _started:
        kill(_started.pop())


def _not_ready(what: str, process: subprocess.Popen[Any], log: Path | None) -> AssertionError:
    kill(process)
    return AssertionError(f"{what} did not become ready:\n{log_text(log)}")


def wait_ready_blocking(
    url: str,
    process: subprocess.Popen[Any],
    log: Path | None = None,
    *,
    seconds: float = READY_SECONDS,
) -> None:
    """Until the server at ``url`` answers ``/readyz`` with 200. Fails, with its log, if the
    process exits or ``seconds`` pass; the process is then killed and reaped."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise _exited(process, log)
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise _not_ready(f"the server at {url}", process, log)


async def wait_ready(
    client: httpx.AsyncClient,
    process: subprocess.Popen[Any],
    log: Path | None = None,
    *,
    seconds: float = READY_SECONDS,
) -> None:
    """:func:`wait_ready_blocking` for an async test, through ``client``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise _exited(process, log)
        try:
            if (await client.get("/readyz", timeout=5)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.05)
    raise _not_ready("the server", process, log)


def _exited(process: subprocess.Popen[Any], log: Path | None) -> AssertionError:
    _close_pipes(process)
    return AssertionError(f"the server exited with {process.returncode}:\n{log_text(log)}")
