"""``/readyz`` asks the store to write: a server whose disk is full is not ready.

The disk fills for real: the kernel refuses the server process's writes past a file size
limit (``RLIMIT_FSIZE``, set on the running process; Python ignores ``SIGXFSZ``, so a write
past it fails with ``EFBIG``, as one on a full disk fails with ``ENOSPC``).
"""

import resource
import time
from pathlib import Path

import httpx

from ..cli.conftest import start_server

DEADLINE = 60.0


def test_readyz_is_503_once_the_store_cannot_write(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data, tmp_path / "serve.log")
    try:
        assert httpx.get(f"{server.url}/readyz", timeout=20).json() == {"ready": True}
        files = [data / "tether.db", data / "tether.db-wal"]
        room = max(path.stat().st_size for path in files if path.exists()) + 64 * 1024
        resource.prlimit(server.process.pid, resource.RLIMIT_FSIZE, (room, room))
        # Each probe commits a heartbeat: a WAL frame beyond the last, until one is refused.
        deadline = time.monotonic() + DEADLINE
        while True:
            response = httpx.get(f"{server.url}/readyz", timeout=20)
            if response.status_code != 200:
                break
            assert time.monotonic() < deadline, "the store kept taking writes"
        assert response.status_code == 503
        assert response.headers["content-type"].startswith("application/json")
        error = response.json()["error"]
        assert error["type"] == "not_ready"
        assert "cannot write" in error["message"]
        assert httpx.get(f"{server.url}/healthz", timeout=20).status_code == 200  # still alive
    finally:
        server.kill()
