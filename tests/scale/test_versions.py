"""Versions across real crashes: ``tether serve`` processes of two versions of one agent on one
store, SIGKILLed mid-tool, and a crash followed by a deploy.

Every process loads :mod:`tests.scale.versions_app` (``mailer``: a model that asks the slow,
non-idempotent ``deliver`` tool, then answers ``"<version>: <its result>"``), the versions it
serves chosen by its environment, and audits each model call and tool run with its pid. A
run is posted to the HTTP API of the server that should start it: with a free slot, a
server claims what it admits in the same commit, so which worker starts a run (and the
version its claim stamps) is the test's choice, not a race.

What the audit holds the engine to: a run started on a version is only ever run (model
calls, tools) by a process serving that version; a tool that a SIGKILL cut is never run
again (it is not idempotent: its outcome is recorded ``unknown``); each run settles once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import JsonValue

from ..postgres import drop_schemas, fresh_schema, store_url
from ..processes import eventually, free_port, kill, log_text, reap, start, wait_ready_blocking
from .versions_app import (
    AGENT,
    AUDIT_ENV,
    GATES_ENV,
    HOLD_ENV,
    POLICY_ENV,
    VERSIONS_ENV,
    audited,
)

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
TETHER = [sys.executable, "-c", "from tether.cli import main; main()"]
APP = "tests.scale.versions_app:agents"
WAIT = 30.0


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


@dataclass
class Server:
    """A ``tether serve`` (API and worker) of some versions of ``mailer``."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def post(self, job: str) -> str:
        """Start a run delivering ``job`` (in a session of its own): its submission id."""
        response = httpx.post(
            f"{self.url}/agents/{AGENT}/me", json={"body": job, "session": job}, timeout=WAIT
        )
        assert response.status_code == 202, response.text
        return str(response.json()["submissionId"])

    def submission(self, submission_id: str, **params: Any) -> dict[str, Any]:
        response = httpx.get(
            f"{self.url}/submissions/{submission_id}", params=params, timeout=WAIT + 5
        )
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def records(self, job: str) -> list[dict[str, Any]]:
        response = httpx.get(
            f"{self.url}/agents/{AGENT}/me/records",
            params={"session": job, "limit": 1000},
            timeout=WAIT,
        )
        assert response.status_code == 200, response.text
        records: list[dict[str, Any]] = response.json()["records"]
        return records


@dataclass
class Deploy:
    """Where the servers of one test keep their store, logs, audit and tool gates."""

    store: str
    tmp: Path

    @property
    def audit(self) -> Path:
        return self.tmp / "audit.jsonl"

    @property
    def gates(self) -> Path:
        return self.tmp / "gates"

    def launch(
        self, name: str, versions: str, policy: str = "pinned", *, held: bool = False
    ) -> Server:
        """Start a server (not waiting for it: :meth:`ready` does). A ``held`` one imports
        its code, then waits for :meth:`release` before it opens the store."""
        self.gates.mkdir(exist_ok=True)
        port, log = free_port(), self.tmp / f"{name}.log"
        env = {
            **os.environ,
            VERSIONS_ENV: versions,
            POLICY_ENV: policy,
            AUDIT_ENV: str(self.audit),
            GATES_ENV: str(self.gates),
        }
        if held:
            env[HOLD_ENV] = str(log.with_suffix(".hold"))
        command = [*TETHER, "serve", "--app", APP, "--store", self.store, "--port", str(port)]
        with log.open("ab") as out:
            process = start(command, stdout=out, stderr=out, env=env, cwd=ROOT)
        return Server(process, f"http://127.0.0.1:{port}", log)

    def ready(self, *servers: Server) -> None:
        for server in servers:
            wait_ready_blocking(server.url, server.process, server.log)

    def release(self, server: Server) -> None:
        """Let a held server go on, and wait until it is ready."""
        server.log.with_suffix(".hold").touch()
        self.ready(server)

    def open_gate(self, job: str) -> None:
        (self.gates / job).touch()

    def events(self, event: str, job: str) -> list[dict[str, JsonValue]]:
        return [e for e in audited(self.audit) if e["event"] == event and e.get("job") == job]

    def tool_started(self, job: str, server: Server) -> None:
        """Until ``server``'s process is running ``job``'s tool."""
        eventually(
            lambda: [e for e in self.events("tool_start", job) if e["pid"] == server.process.pid],
            lambda: f"{job}'s tool never started on {server.url}:\n{log_text(server.log)}",
            seconds=WAIT,
        )

    def pids_of(self, job: str) -> set[JsonValue]:
        """Every process that made a model call or ran a tool for ``job``."""
        return {e["pid"] for e in audited(self.audit) if e.get("job") == job}

    def versions_of(self, job: str) -> set[JsonValue]:
        return {e["version"] for e in audited(self.audit) if e.get("job") == job}


def _stranded(server: Server, submission_id: str) -> dict[str, Any] | None:
    """The submission, once ``server`` shows it waiting for a worker of its version."""
    info = server.submission(submission_id)
    return info if info.get("waitReason") == "no_worker_for_version" else None


def _settled_once(server: Server, job: str, submission_id: str) -> dict[str, Any]:
    """The settled submission; its log holds one settlement."""
    info = server.submission(submission_id, wait="true")
    assert info["status"] == "settled", info
    kinds = [r["kind"] for r in server.records(job)]
    assert kinds.count("submission_settled") == 1, kinds
    return info


def _killed_mid_tool(deploy: Deploy, server: Server, job: str, survivor: Server) -> str:
    """Run ``job`` on ``server`` and SIGKILL it mid-tool; once ``survivor`` shows the run
    waiting for a worker of its version, its submission id. The tool's gate is opened at
    once: a tool run again after the kill would end now, and show in the audit."""
    submission_id = server.post(job)
    deploy.tool_started(job, server)
    kill(server.process)
    deploy.open_gate(job)
    stranded = eventually(
        lambda: _stranded(survivor, submission_id),
        lambda: f"{job} never waited for its version:\n{log_text(survivor.log)}",
        seconds=WAIT,
    )
    assert stranded["status"] == "waiting", stranded
    assert not deploy.events("tool_start", job)[1:], "the survivor ran the cut tool"
    return submission_id


def _finished_once(
    deploy: Deploy, server: Server, job: str, submission_id: str, version: str
) -> dict[str, Any]:
    """``job``, finished by ``server`` on ``version``: its cut tool recorded ``unknown`` (not
    run again), every model call and tool run it got made by ``version``'s code."""
    settled = _settled_once(server, job, submission_id)
    result = str(settled["settlement"]["result"])
    assert result.startswith(f"{version}: ") and "unknown" in result, settled
    assert settled["version"] == version
    assert len(deploy.events("tool_start", job)) == 1
    assert deploy.versions_of(job) == {version}
    first, second = settled["attempts"]
    assert first["ownerId"] != second["ownerId"]
    return settled


@pytest.mark.postgres
def test_a_killed_v1_worker_run_waits_for_v1_on_postgres(tmp_path: Path) -> None:
    """A v1 server and a v2 server (both ``pinned``) on one PostgreSQL schema; each starts
    a run (a on v1, b on v2); the v1 server is SIGKILLed mid-tool.

    The v2 server finds v1's worker dead (its liveness lock is free) and releases a's claim at
    once; a is then queued on v1, which no live worker runs: ``GET /submissions/{id}`` shows
    it ``waiting`` / ``no_worker_for_version``, ``GET /versions`` shows v1 with a queued run
    and no worker, and the v2 server never touches it. A server that runs v1 beside v2 (its
    app gives ``{"v1": ..., "v2": ...}``) takes it and finishes it on v1: its tool, cut
    mid-run, is recorded ``unknown``, not run again. b, on v2 all along, is left alone."""
    deploy = Deploy(store_url(fresh_schema()), tmp_path)
    one, two = deploy.launch("v1", "v1"), deploy.launch("v2", "v2")
    both = deploy.launch("v1v2", "v1,v2", held=True)
    deploy.ready(one, two)
    b = two.post("b")
    deploy.tool_started("b", two)
    a = _killed_mid_tool(deploy, one, "a", survivor=two)
    assert two.submission(a)["version"] == "v1"
    states = {
        s["version"]: s for s in httpx.get(f"{two.url}/versions", timeout=WAIT).json()["versions"]
    }
    assert (states["v1"]["queued"], states["v1"]["workers"]) == (1, 0), states
    assert (states["v2"]["running"], states["v2"]["workers"]) == (1, 1), states
    assert not states["v1"]["retirable"]

    deploy.release(both)
    _finished_once(deploy, both, "a", a, "v1")
    assert deploy.pids_of("a") == {one.process.pid, both.process.pid}
    assert deploy.pids_of("b") == {two.process.pid}  # b stays where it started
    assert two.submission(b)["status"] == "running"
    deploy.open_gate("b")
    assert str(_settled_once(two, "b", b)["settlement"]["result"]) == "v2: delivered b on v2"
    for server in (two, both):
        reap(server.process)


@pytest.mark.postgres
def test_a_killed_v2_worker_run_waits_for_v2_on_postgres(tmp_path: Path) -> None:
    """The other way round: the v2 server SIGKILLed mid-tool while a v1 server lives. The v1
    server releases the dead worker's claim and shows b waiting for a worker of v2, and leaves
    it; a new v2 server takes it over and finishes it on v2, the cut tool ``unknown``."""
    deploy = Deploy(store_url(fresh_schema()), tmp_path)
    one, two = deploy.launch("v1", "v1"), deploy.launch("v2", "v2")
    again = deploy.launch("v2-again", "v2", held=True)
    deploy.ready(one, two)
    b = _killed_mid_tool(deploy, two, "b", survivor=one)
    assert one.submission(b)["version"] == "v2"
    deploy.release(again)
    _finished_once(deploy, again, "b", b, "v2")
    assert deploy.pids_of("b") == {two.process.pid, again.process.pid}
    for server in (one, again):
        reap(server.process)


def test_a_crash_then_a_deploy_under_upgrade_resumes_on_the_new_version(tmp_path: Path) -> None:
    """SQLite: a v1 run SIGKILLed mid-tool, the server restarted as v2 under ``upgrade``.

    The new server takes the dead one's run over (its liveness lock is free) and resumes it on
    v2: its recorded model call was made under v1's system prompt, so the log gets a
    ``version_changed`` (v1 -> v2, ``upgrade``, ``system prompt``, at that call's seq) before
    anything new; the cut tool (not idempotent) is recorded ``unknown``, not run again; the
    answer comes from v2, and the run settles once, its submission now on v2."""
    deploy = Deploy(f"sqlite:///{tmp_path / 'data'}", tmp_path)
    one = deploy.launch("v1", "v1")
    two = deploy.launch("v2", "v2", policy="upgrade", held=True)
    deploy.ready(one)
    c = one.post("c")
    deploy.tool_started("c", one)
    kill(one.process)
    deploy.open_gate("c")
    deploy.release(two)
    settled = _settled_once(two, "c", c)
    result = str(settled["settlement"]["result"])
    assert result.startswith("v2: ") and "unknown" in result, settled
    assert settled["version"] == "v2"
    assert len(deploy.events("tool_start", "c")) == 1
    assert {e["version"] for e in deploy.events("model", "c")} == {"v1", "v2"}
    records = two.records("c")
    kinds = [r["kind"] for r in records]
    [changed] = [r["payload"] for r in records if r["kind"] == "version_changed"]
    assert changed["fromVersion"] == "v1" and changed["toVersion"] == "v2", changed
    assert changed["reason"] == "upgrade" and changed["differs"] == ["system prompt"], changed
    [first_call] = [r for r in records if r["kind"] == "model_called"][:1]
    assert changed["divergedAt"] == first_call["seq"], (changed, first_call)
    assert kinds.index("version_changed") < kinds.index("tool_outcome")
    [outcome] = [r["payload"] for r in records if r["kind"] == "tool_outcome"]
    assert outcome["status"] == "unknown" and outcome["isError"], outcome
    reap(two.process)
