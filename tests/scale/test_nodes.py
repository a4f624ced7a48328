"""An API node and a worker node on one PostgreSQL schema, as real processes.

``tether serve --no-worker`` admits and streams; a separate ``tether worker`` runs the demo
assistant's submissions. An SSE client on the API node follows a session that only the worker
can run: every record reaches it live, in order, up to ``submission_settled``, and ``POST
?wait=true`` on the API node returns the result the worker settled.

Both processes open the store with ``poll_interval=3600``, so a record that reached the API
node within the test's bounds came through LISTEN/NOTIFY, not a poll of the head.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from ..postgres import drop_schemas, fresh_schema, store_url
from ..processes import free_port, log_text, reap, start, wait_ready

pytestmark = [pytest.mark.process, pytest.mark.postgres]

TETHER = [sys.executable, "-c", "from tether.cli import main; main()"]
AGENT = "/agents/assistant/me"


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


def _start(log: Path, *args: str, research: str = "0.3") -> subprocess.Popen[bytes]:
    env = {**os.environ, "TETHER_DEMO_RESEARCH_SECONDS": research}
    with log.open("ab") as out:
        return start([*TETHER, *args], stdout=out, stderr=out, env=env)


@dataclass
class Frame:
    id: int
    kind: str
    data: str
    at: float = field(default_factory=time.time)  # the wall clock, as a record's ``time``


async def _follow(client: httpx.AsyncClient, frames: list[Frame], connected: asyncio.Event) -> None:
    """Read the record stream until ``submission_settled``."""
    async with client.stream("GET", AGENT, params={"session": "tides", "follow": True}) as stream:
        assert stream.status_code == 200
        connected.set()
        fields: dict[str, str] = {}
        async for line in stream.aiter_lines():
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if "id" in fields:  # records only: live progress events carry no id
                frames.append(Frame(int(fields["id"]), fields["event"], fields["data"]))
                if fields["event"] == "submission_settled":
                    return
            fields = {}


async def test_sse_on_the_api_node_follows_a_run_on_the_worker(tmp_path: Path) -> None:
    url = store_url(fresh_schema(), poll_interval="3600")
    port = free_port()
    api_log, worker_log = tmp_path / "api.log", tmp_path / "worker.log"
    api = _start(api_log, "serve", "--demo", "--store", url, "--no-worker", "--port", str(port))
    # The research lasts 3 s: the stream shows it started long before it ends, on any machine.
    worker = _start(worker_log, "worker", "--demo", "--store", url, research="3")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=90) as client:
            await wait_ready(client, api, api_log)
            frames: list[Frame] = []
            async with asyncio.timeout(60):
                # The follower is in place before the session exists: everything it gets is live.
                connected = asyncio.Event()
                following = asyncio.create_task(_follow(client, frames, connected))
                await connected.wait()
                response = await client.post(
                    AGENT,
                    params={"wait": True},
                    json={"body": "research tides", "session": "tides"},
                )
                await following
            assert worker.poll() is None, log_text(worker_log)
            assert response.status_code == 200, response.text
            settled: dict[str, Any] = response.json()
            assert settled["status"] == "succeeded", settled
            assert "three findings about tides" in str(settled["result"])
            info = (await client.get(f"/submissions/{settled['submissionId']}")).json()
            records = (
                await client.get(f"{AGENT}/records", params={"session": "tides", "limit": 1000})
            ).json()["records"]
    finally:
        reap(api)
        reap(worker)

    assert info["status"] == "settled" and len(info["attempts"]) == 1, info
    assert [f.id for f in frames] == list(range(1, len(records) + 1)), "holes or duplicates"
    assert [f.kind for f in frames] == [r["kind"] for r in records]
    assert frames[-1].kind == "submission_settled"
    kinds = [f.kind for f in frames]
    assert "tool_called" in kinds and "tool_outcome" in kinds, kinds
    # Live, not a replay at the end: the research's start reached the stream before its outcome
    # was recorded (both clocks are this machine's wall clock).
    started = next(f for f in frames if f.kind == "tool_called")
    outcome = next(r for r in records if r["kind"] == "tool_outcome")
    assert started.at < datetime.fromisoformat(outcome["time"]).timestamp(), (started, outcome)
