"""An API node and worker nodes on one PostgreSQL schema, as real processes.

``tether serve --no-worker`` admits and streams; a separate ``tether worker`` runs the demo
assistant's submissions. An SSE client on the API node follows a session that only the worker
can run: every record reaches it live, in order, up to ``submission_settled``, and ``POST
?wait=true`` on the API node returns the result the worker settled. With two workers, the one
running a submission is SIGKILLed mid-tool: the other takes the run over once the lease is
found dead, and the stream on the API node goes on to the settlement, each effect done once
(docs/deploy.md, "Running the API and workers apart").

Both processes open the store with ``poll_interval=3600``, so a record that reached the API
node within the test's bounds came through LISTEN/NOTIFY, not a poll of the head.
"""

from __future__ import annotations

import asyncio
import json
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
from ..processes import eventually, free_port, kill, log_text, reap, start, wait_ready
from .chaos_app import LOG_ENV
from .held_app import RELEASE_ENV

pytestmark = [pytest.mark.process, pytest.mark.postgres]

TETHER = [sys.executable, "-c", "from tether.cli import main; main()"]
AGENT = "/agents/assistant/me"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


def _start(log: Path, *args: str, research: str = "0.3", **env: str) -> subprocess.Popen[bytes]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    environment = {
        **os.environ,
        "TETHER_DEMO_RESEARCH_SECONDS": research,
        "PYTHONPATH": path,  # the held app is tests.scale.held_app
        **env,
    }
    with log.open("ab") as out:
        return start([*TETHER, *args], stdout=out, stderr=out, env=environment, cwd=ROOT)


@dataclass
class Frame:
    id: int
    kind: str
    data: str
    at: float = field(default_factory=time.time)  # the wall clock, as a record's ``time``


async def _follow(
    client: httpx.AsyncClient,
    frames: list[Frame],
    connected: asyncio.Event,
    path: str = AGENT,
    session: str = "tides",
) -> None:
    """Read the record stream until ``submission_settled``."""
    async with client.stream("GET", path, params={"session": session, "follow": True}) as stream:
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


async def test_a_worker_killed_mid_run_the_other_finishes_it_on_the_api_nodes_stream(
    tmp_path: Path,
) -> None:
    url = store_url(fresh_schema(), poll_interval="3600")
    port = free_port()
    audit, release = tmp_path / "audit.jsonl", tmp_path / "release"
    os.mkfifo(release)
    env = {LOG_ENV: str(audit), RELEASE_ENV: str(release)}
    app = ("--app", "tests.scale.held_app:agents", "--store", url)
    api_log = tmp_path / "api.log"
    api = _start(api_log, "serve", *app, "--no-worker", "--port", str(port), **env)
    workers = {
        process.pid: process
        for process in (
            _start(tmp_path / f"worker{n}.log", "worker", *app, "--lease", "1", **env)
            for n in (1, 2)
        )
    }

    def events(kind: str) -> list[dict[str, Any]]:
        lines = audit.read_text().splitlines() if audit.exists() else []
        return [event for line in lines if (event := json.loads(line))["event"] == kind]

    def logs() -> str:
        return "\n".join(log_text(log) for log in sorted(tmp_path.glob("*.log")))

    def released() -> None:
        with release.open("wb") as pipe:  # blocks until the survivor's tool opens it to read
            pipe.write(b"released")

    path = "/agents/held/me"
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=90) as client:
            await wait_ready(client, api, api_log)
            frames: list[Frame] = []
            async with asyncio.timeout(90):
                connected = asyncio.Event()
                following = asyncio.create_task(
                    _follow(client, frames, connected, path, session="held")
                )
                await connected.wait()
                accepted = await client.post(path, json={"body": "hold on", "session": "held"})
                assert accepted.status_code == 202, accepted.text
                submission_id = accepted.json()["submissionId"]
                # Another process's doing: polled, off the loop that reads the stream.
                [first] = await asyncio.to_thread(eventually, lambda: events("tool_start"), logs)
                kill(workers[first["pid"]])  # SIGKILL, held mid-tool
                [survivor] = [pid for pid in workers if pid != first["pid"]]
                await asyncio.to_thread(eventually, lambda: len(events("tool_start")) == 2, logs)
                await asyncio.to_thread(released)
                await following
                # The stream saw it settle: read, no ?wait.
                settled = (await client.get(f"/submissions/{submission_id}")).json()
                records = (
                    await client.get(f"{path}/records", params={"session": "held", "limit": 1000})
                ).json()["records"]
            assert workers[survivor].poll() is None, logs()
    finally:
        reap(api)
        for process in workers.values():
            reap(process)

    assert settled.get("status") == "settled", settled
    assert settled["settlement"]["result"] == "done", settled
    killed_owner, survivor_owner = (attempt["ownerId"] for attempt in settled["attempts"])
    assert killed_owner != survivor_owner, settled
    # The stream on the API node: every record once, in order, through the takeover.
    assert [f.id for f in frames] == list(range(1, len(records) + 1)), "holes or duplicates"
    assert [f.kind for f in frames] == [r["kind"] for r in records]
    assert frames[-1].kind == "submission_settled"
    # The effects: the tool ran on each worker and finished once, on the survivor; each model
    # call was made once (the one before the kill is served from the log on the takeover).
    assert [e["pid"] for e in events("tool_start")] == [first["pid"], survivor]
    assert [e["pid"] for e in events("tool_end")] == [survivor]
    hashes = [e["hash"] for e in events("model")]
    assert len(hashes) == 2 and len(set(hashes)) == 2, events("model")
    [outcome] = [r for r in records if r["kind"] == "tool_outcome"]
    assert "released" in json.dumps(outcome["payload"]), outcome
