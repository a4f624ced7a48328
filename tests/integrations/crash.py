"""The kill -9 scenario every durable adapter must survive, with real processes.

``tether serve --app`` runs the adapter's agent; once its tool call is journaled as started
(and the tool is still sleeping), the server is SIGKILLed and a new one started on the same
store. What the restarted server settled, logged and streams is returned for the test's
framework-specific checks.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from ..cli.conftest import start_server
from ..processes import eventually

__all__ = ("CrashRun", "kill_mid_tool")


@dataclass
class CrashRun:
    settled: dict[str, Any]
    records: list[dict[str, Any]]
    events: list[dict[str, Any]]
    """The session's canonical stream (``?view=stream``) after the restart."""

    @property
    def kinds(self) -> list[str]:
        return [str(record["kind"]) for record in self.records]


def _records(url: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/records", params={"limit": 1000}, timeout=30)
    response.raise_for_status()
    records: list[dict[str, Any]] = response.json()["records"]
    return records


def _events(url: str) -> list[dict[str, Any]]:
    with httpx.stream("GET", url, params={"view": "stream"}, timeout=30) as stream:
        return [
            orjson.loads(line.removeprefix("data: "))
            for line in stream.iter_lines()
            if line.startswith("data: ")
        ]


def kill_mid_tool(
    tmp_path: Path,
    *,
    app: str,
    session: str,
    body: str,
    slow: dict[str, str],
    fast: dict[str, str],
    env: dict[str, str],
    before_restart: Callable[[], None] | None = None,
) -> CrashRun:
    """Dispatch ``body`` to ``session`` (``/agents/{agent}/{instance}``) on a server whose
    tool is slow (``slow`` env), SIGKILL it mid-tool, restart it with ``fast``, and collect.
    ``before_restart()`` runs between the two lives (to check what the first one did)."""
    data, log = tmp_path / "data", tmp_path / "serve.log"
    first = start_server(data, log, "--lease", "1", app=app, **env, **slow)
    try:
        accepted = httpx.post(f"{first.url}{session}", json={"body": body}, timeout=30).json()
        eventually(
            lambda: "tool_called" in [r["kind"] for r in _records(f"{first.url}{session}")],
            log.read_text,
        )
    finally:
        first.kill()  # mid-tool on the way through; never left running if the wait failed
    if before_restart is not None:
        before_restart()
    second = start_server(data, log, "--lease", "1", app=app, **env, **fast)
    try:
        settled = httpx.get(
            f"{second.url}/submissions/{accepted['submissionId']}",
            params={"wait": True},
            timeout=90,  # the server holds ?wait for 60 s, then answers with the status
        ).json()
        run = CrashRun(
            settled, _records(f"{second.url}{session}"), _events(f"{second.url}{session}")
        )
    finally:
        second.stop()
    assert settled["status"] == "settled", (settled, log.read_text())
    assert run.kinds.count("submission_settled") == 1
    attempts = {r["attemptId"] for r in run.records if r.get("attemptId")}
    assert len(attempts) == 2, attempts
    assert [r["seq"] for r in run.records] == list(range(1, len(run.records) + 1))
    return run
