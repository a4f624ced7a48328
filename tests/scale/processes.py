"""Helpers for the tests that run real Tether processes: a free port, and waiting for an
API node to answer ``/readyz``."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_text(log: Path | None) -> str:
    return log.read_text(errors="replace") if log is not None and log.exists() else ""


async def wait_ready(
    client: httpx.AsyncClient, process: subprocess.Popen[bytes], log: Path | None = None
) -> None:
    """Until the node answers ``/readyz`` (30 s at most); fails, with its log, if it exits."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, "the API node exited:\n" + log_text(log)
        try:
            if (await client.get("/readyz", timeout=1)).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.05)
    raise AssertionError("the API node did not become ready:\n" + log_text(log))
