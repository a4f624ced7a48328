"""``/readyz`` asks the store to write: a server whose disk is full is not ready. It lists
each dependency (the store, a worker's liveness lock, an exporter) with its state.

The disk fills for real: the kernel refuses the server process's writes past a file size
limit (``RLIMIT_FSIZE``, set on the running process; Python ignores ``SIGXFSZ``, so a write
past it fails with ``EFBIG``, as one on a full disk fails with ``ENOSPC``).
"""

import logging
import resource
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.demo import demo_agents
from tether.engine import Dependency, Instrument, MetricsSnapshot
from tether.errors import StoreUnavailable, TetherError
from tether.store import Store, StoreCapabilities

from ..cli.conftest import start_server
from .conftest import Server

DEADLINE = 60.0


def test_readyz_is_503_once_the_store_cannot_write(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data, tmp_path / "serve.log")
    try:
        ready = httpx.get(f"{server.url}/readyz", timeout=20).json()
        assert ready["ready"] is True
        assert {d["name"]: d["state"] for d in ready["dependencies"]} == {
            "store": "up",
            "liveness": "up",  # the worker holds its flock beside the SQLite file
        }
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
        assert "sqlite" not in error["message"]  # the reason is in the log, not the answer
        assert httpx.get(f"{server.url}/healthz", timeout=20).status_code == 200  # still alive
    finally:
        server.kill()


async def _probe(asgi: Any, store: Store, failure: BaseException) -> httpx.Response:
    server: Server = await asgi(demo_agents())

    async def ping() -> None:
        raise failure

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "ping", ping)
        return await server.client.get("/readyz")


async def test_readyz_is_503_when_the_store_is_unavailable_and_says_no_more(
    asgi: Any, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Not ready is the store's state: the reason (a path, a database host) is logged, not
    given to whoever asks, which needs no token."""
    failure = StoreUnavailable("sqlite commit failed: disk I/O error at /srv/secret/tether.db")
    with caplog.at_level(logging.WARNING, logger="tether.http"):
        answer = await _probe(asgi, store, failure)
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["type"] == "not_ready"
    assert "cannot write" in error["message"] and "/srv/secret" not in answer.text
    assert "/srv/secret" in caplog.text


async def test_readyz_is_a_logged_500_for_anything_but_the_store_being_unavailable(
    asgi: Any, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Anything else is Tether's own defect: not "not ready" (a load balancer would take the
    node out and back forever), a 500 ``internal`` with its traceback in the log and none of
    its text in the answer."""
    for failure in (RuntimeError("secret"), KeyError("secret"), TetherError("secret")):
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="tether.http"):
            answer = await _probe(asgi, store, failure)
        assert answer.status_code == 500, (failure, answer.text)
        assert answer.json()["error"]["type"] == "internal"
        assert "secret" not in answer.text
        [logged] = [r for r in caplog.records if r.exc_info is not None]
        assert logged.exc_info is not None and logged.exc_info[1] is failure


def _listed(answer: httpx.Response) -> dict[str, str]:
    body = answer.json()
    found = body["dependencies"] if "ready" in body else body["error"]["details"]["dependencies"]
    return {item["name"]: item["state"] for item in found}


async def test_readyz_lists_each_dependency(asgi: Any, store: Store) -> None:
    server: Server = await asgi(demo_agents())
    answer = await server.client.get("/readyz")
    assert answer.status_code == 200 and answer.json()["ready"] is True
    held = StoreCapabilities.of(store).liveness is not None  # SQLite's flock, PostgreSQL's lock
    assert _listed(answer) == {"store": "up", **({"liveness": "up"} if held else {})}
    api_only: Server = await asgi(demo_agents(), worker=False)
    assert _listed(await api_only.client.get("/readyz")) == {"store": "up"}  # no worker: no lock


async def test_readyz_is_503_for_a_worker_without_its_liveness_lock(
    asgi: Any, store: Store
) -> None:
    """A worker that could not take its lock runs on, but a crash of it would be taken over
    only after a lease: not ready, and the answer says which dependency is down."""
    if StoreCapabilities.of(store).liveness is None:
        pytest.skip("the memory store holds no liveness locks")

    async def taken(owner_id: str) -> None:
        raise StoreUnavailable(f"owner id {owner_id!r} is in use by a live process")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store, "hold_liveness", taken)
        server: Server = await asgi(demo_agents())
        answer = await server.client.get("/readyz")
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["type"] == "not_ready" and "liveness" in error["message"]
    assert _listed(answer) == {"store": "up", "liveness": "down"}


class _Exporter:
    """A metric sink whose collector is down: reported, never required."""

    def add(self, instrument: Instrument, labels: tuple[str, ...], value: float) -> None:
        pass

    def record(self, instrument: Instrument, labels: tuple[str, ...], value: float) -> None:
        pass

    def gauges(self, snapshot: MetricsSnapshot) -> None:
        pass

    def health(self) -> Dependency:
        return Dependency("otlp", "down", required=False, detail="the last export failed")


async def test_readyz_reports_an_exporter_down_and_stays_ready(asgi: Any) -> None:
    server: Server = await asgi(
        demo_agents(), settings={"metric_sinks": [_Exporter()]}, worker=False
    )
    answer = await server.client.get("/readyz")
    assert answer.status_code == 200, answer.text
    assert answer.json()["dependencies"][-1] == {
        "name": "otlp",
        "state": "down",
        "required": False,
        "detail": "the last export failed",
    }
