"""``tether serve`` as a real child process on an ephemeral port."""

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..processes import free_port, kill, reap, start, wait_ready_blocking

TETHER = [sys.executable, "-c", "from tether.cli import main; main()"]


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    url: str
    store: str

    def kill(self) -> None:
        """SIGKILL, as a crash would; waits for the process and closes its pipes."""
        kill(self.process)

    def stop(self) -> None:
        """SIGTERM, as an operator would (SIGKILL if it does not exit in time)."""
        reap(self.process)


def cli_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "TETHER_DEMO_RESEARCH_SECONDS": "0.3", **extra}


def start_server(
    data: Path, log: Path, *args: str, app: str | None = None, **env: str
) -> ServerProcess:
    """``tether serve`` on ``data``: the demo agents, or ``app`` (``module:factory``)."""
    return start_server_on(free_port(), data, log, *args, app=app, **env)


def start_server_on(
    port: int, data: Path, log: Path, *args: str, app: str | None = None, **env: str
) -> ServerProcess:
    """:func:`start_server` on ``port``: a restart on the address of one that stopped."""
    store = f"sqlite:///{data}"
    agents = ["--app", app] if app is not None else ["--demo"]
    with log.open("ab") as out:
        process = start(
            [*TETHER, "serve", *agents, "--store", store, "--port", str(port), *args],
            stdout=out,
            stderr=out,
            env=cli_env(**env),
        )
    url = f"http://127.0.0.1:{port}"
    wait_ready_blocking(url, process, log)
    return ServerProcess(process, url, store)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    started = start_server(tmp_path / "data", tmp_path / "serve.log")
    yield started
    started.stop()
