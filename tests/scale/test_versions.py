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
from .versions_app import AGENT, AUDIT_ENV, GATES_ENV, POLICY_ENV, VERSIONS_ENV, audited

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

    def launch(self, name: str, versions: str, policy: str = "pinned") -> Server:
        """Start a server (not waiting for it: :meth:`ready` does)."""
        self.gates.mkdir(exist_ok=True)
        port, log = free_port(), self.tmp / f"{name}.log"
        env = {
            **os.environ,
            VERSIONS_ENV: versions,
            POLICY_ENV: policy,
            AUDIT_ENV: str(self.audit),
            GATES_ENV: str(self.gates),
        }
        command = [*TETHER, "serve", "--app", APP, "--store", self.store, "--port", str(port)]
        with log.open("ab") as out:
            process = start(command, stdout=out, stderr=out, env=env, cwd=ROOT)
        return Server(process, f"http://127.0.0.1:{port}", log)

    def ready(self, *servers: Server) -> None:
        for server in servers:
            wait_ready_blocking(server.url, server.process, server.log)

    def serve(self, name: str, versions: str, policy: str = "pinned") -> Server:
        server = self.launch(name, versions, policy)
        self.ready(server)
        return server

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


@pytest.mark.postgres
def test_two_live_versions_on_postgres_each_run_stays_on_its_own(tmp_path: Path) -> None:
    """A v1 server and a v2 server (both ``pinned``) on one PostgreSQL schema, each running a
    run it started (a on v1, b on v2), each SIGKILLed mid-tool in turn.

    - Killed v1: the v2 server finds v1's worker dead (its liveness lock is free) and releases
      a's claim at once; a is then queued on v1, which no live worker runs, so
      ``GET /submissions/{id}`` shows it ``waiting`` / ``no_worker_for_version`` and the v2
      server never touches it. A new v1 server takes it and finishes it: its tool, cut
      mid-run, is recorded ``unknown`` (not run again), the answer comes from v1.
    - Killed v2: b is likewise left to a v2-capable worker; the v1 server, live all along,
      shows it waiting and leaves it; a new v2 server finishes it.
    """
    deploy = Deploy(store_url(fresh_schema()), tmp_path)
    one, two = deploy.launch("v1", "v1"), deploy.launch("v2", "v2")
    try:
        deploy.ready(one, two)
        a, b = one.post("a"), two.post("b")
        deploy.tool_started("a", one)
        deploy.tool_started("b", two)
        assert (two.submission(a)["version"], one.submission(b)["version"]) == ("v1", "v2")

        kill(one.process)  # SIGKILL, mid-tool
        deploy.open_gate("a")  # a tool run again would end now, and show in the audit
        stranded = eventually(lambda: _stranded(two, a), lambda: log_text(two.log), seconds=WAIT)
        assert stranded["status"] == "waiting" and stranded["version"] == "v1", stranded
        versions = httpx.get(f"{two.url}/versions", timeout=WAIT).json()
        print(versions)

        again = deploy.serve("v1-again", "v1")
        settled = _settled_once(again, "a", a)
        assert str(settled["settlement"]["result"]).startswith("v1: "), settled
        assert "unknown" in str(settled["settlement"]["result"]), settled
        assert len(deploy.events("tool_start", "a")) == 1  # cut once, never run again
        assert deploy.versions_of("a") == {"v1"}
        assert deploy.pids_of("a") == {one.process.pid, again.process.pid}
        assert [t["ownerId"] for t in settled["attempts"]][0] != settled["attempts"][1]["ownerId"]

        kill(two.process)  # SIGKILL, mid-tool: b is v2's
        deploy.open_gate("b")
        stranded = eventually(lambda: _stranded(again, b), lambda: log_text(again.log))
        assert stranded["version"] == "v2", stranded
        two_again = deploy.serve("v2-again", "v2")
        settled = _settled_once(two_again, "b", b)
        assert str(settled["settlement"]["result"]).startswith("v2: "), settled
        assert len(deploy.events("tool_start", "b")) == 1
        assert deploy.versions_of("b") == {"v2"}
        assert deploy.pids_of("b") == {two.process.pid, two_again.process.pid}
        for server in (again, two_again):
            reap(server.process)
    finally:
        for server in (one, two):
            kill(server.process)


def test_a_crash_then_a_deploy_under_upgrade_resumes_on_the_new_version(tmp_path: Path) -> None:
    """SQLite: a v1 run SIGKILLed mid-tool, the server restarted as v2 under ``upgrade``.

    The new server takes the dead one's run over (its liveness lock is free) and resumes it on
    v2: its recorded model call was made under v1's system prompt, so the log gets a
    ``version_changed`` (v1 -> v2, ``system prompt``) before anything new; the cut tool (not
    idempotent) is recorded ``unknown``, not run again; the answer comes from v2, and the run
    settles once, its submission now on v2."""
    deploy = Deploy(f"sqlite:///{tmp_path / 'data'}", tmp_path)
    one = deploy.serve("v1", "v1")
    try:
        c = one.post("c")
        deploy.tool_started("c", one)
    finally:
        kill(one.process)
    deploy.open_gate("c")
    two = deploy.serve("v2", "v2", policy="upgrade")
    settled = _settled_once(two, "c", c)
    result = str(settled["settlement"]["result"])
    assert result.startswith("v2: ") and "unknown" in result, settled
    assert settled["version"] == "v2"
    assert len(deploy.events("tool_start", "c")) == 1
    records = two.records("c")
    kinds = [r["kind"] for r in records]
    [changed] = [r for r in records if r["kind"] == "version_changed"]
    print(changed)
    assert kinds.index("version_changed") < kinds.index("tool_outcome")
    reap(two.process)
