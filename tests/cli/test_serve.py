"""``tether serve`` survives SIGKILL mid-run: a restart takes the run over and settles it once."""

import time
from pathlib import Path

import httpx

from .conftest import start_server


def _records(url: str, path: str) -> list[dict[str, object]]:
    response = httpx.get(f"{url}{path}/records", params={"limit": 1000}, timeout=30)
    response.raise_for_status()
    records: list[dict[str, object]] = response.json()["records"]
    return records


def test_sigkill_mid_research_then_restart_settles_once(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "serve.log"
    slow = {"TETHER_DEMO_RESEARCH_SECONDS": "30"}
    first = start_server(data, log, "--lease", "1", **slow)
    try:
        accepted = httpx.post(
            f"{first.url}/agents/assistant/me", json={"body": "research tides"}, timeout=30
        ).json()
        deadline = time.monotonic() + 60
        path = "/agents/assistant/me"
        while not any(r["kind"] == "tool_called" for r in _records(first.url, path)):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        first.kill()  # mid-tool: the research call is journaled as started, not finished

    second = start_server(data, log, "--lease", "1", TETHER_DEMO_RESEARCH_SECONDS="0.2")
    try:
        settled = httpx.get(
            f"{second.url}/submissions/{accepted['submissionId']}",
            params={"wait": True},
            timeout=90,  # the server holds ?wait for 60 s, then answers with the status
        ).json()
        assert settled["status"] == "settled", settled
        assert "three findings about tides" in str(settled["settlement"]["result"])
        records = _records(second.url, "/agents/assistant/me")
    finally:
        second.stop()
    kinds = [r["kind"] for r in records]
    assert kinds.count("submission_settled") == 1
    attempts = {r["attemptId"] for r in records if r.get("attemptId")}
    assert len(attempts) == 2, attempts
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
