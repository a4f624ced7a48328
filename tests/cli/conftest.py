"""``tether serve`` as a real child process on an ephemeral port."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

TETHER = [sys.executable, "-c", "from tether.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    url: str
    store: str

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


def cli_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "TETHER_DEMO_RESEARCH_SECONDS": "0.3", **extra}


def start_server(
    data: Path, log: Path, *args: str, app: str | None = None, **env: str
) -> ServerProcess:
    """``tether serve`` on ``data``: the demo agents, or ``app`` (``module:factory``)."""
    port = free_port()
    store = f"sqlite:///{data}"
    agents = ["--app", app] if app is not None else ["--demo"]
    with log.open("ab") as out:
        process = subprocess.Popen(
            [*TETHER, "serve", *agents, "--store", store, "--port", str(port), *args],
            stdout=out,
            stderr=out,
            env=cli_env(**env),
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(log.read_text())
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return ServerProcess(process, url, store)
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    process.kill()
    raise AssertionError("tether serve did not become ready:\n" + log.read_text())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    started = start_server(tmp_path / "data", tmp_path / "serve.log")
    yield started
    if started.process.poll() is None:
        started.process.terminate()
        started.process.wait(10)
