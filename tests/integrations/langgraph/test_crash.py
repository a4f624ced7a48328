"""``tether serve --app`` running the LangGraph agent survives SIGKILL mid-tool."""

import time
from pathlib import Path

import httpx

from ...cli.conftest import start_server
from .app import CALLS_ENV, TOOL_SECONDS_ENV

APP = "tests.integrations.langgraph.app:agents"
PATH = "/agents/react/me"


def _records(url: str) -> list[dict[str, object]]:
    response = httpx.get(f"{url}{PATH}/records", params={"limit": 1000}, timeout=10)
    response.raise_for_status()
    records: list[dict[str, object]] = response.json()["records"]
    return records


def test_sigkill_mid_tool_then_restart_settles_once(tmp_path: Path) -> None:
    data, log, calls = tmp_path / "data", tmp_path / "serve.log", tmp_path / "calls.log"
    env = {CALLS_ENV: str(calls)}
    first = start_server(data, log, "--lease", "1", app=APP, **env, **{TOOL_SECONDS_ENV: "30"})
    accepted = httpx.post(f"{first.url}{PATH}", json={"body": "tides"}, timeout=10).json()
    deadline = time.monotonic() + 30
    while not any(r["kind"] == "tool_called" for r in _records(first.url)):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    first.kill()  # mid-tool: the lookup is journaled as started, not finished
    assert calls.read_text().splitlines() == ["1:lookup"]

    second = start_server(data, log, "--lease", "1", app=APP, **env, **{TOOL_SECONDS_ENV: "0"})
    try:
        settled = httpx.get(
            f"{second.url}/submissions/{accepted['submissionId']}",
            params={"wait": True},
            timeout=60,
        ).json()
        records = _records(second.url)
    finally:
        second.process.terminate()
        second.process.wait(10)
    assert settled["status"] == "settled", settled
    assert settled["settlement"]["result"] == "answer: facts about tides", settled
    # The recorded first model call was served from the log; only the second one ran.
    assert calls.read_text().splitlines() == ["1:lookup", "1:answer"]
    kinds = [r["kind"] for r in records]
    assert kinds.count("submission_settled") == 1
    assert kinds.count("model_called") == 2 and kinds.count("tool_called") == 1
    assert kinds.count("tool_outcome") == 1  # the idempotent lookup was re-driven once
    attempts = {r["attemptId"] for r in records if r.get("attemptId")}
    assert len(attempts) == 2, attempts
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
