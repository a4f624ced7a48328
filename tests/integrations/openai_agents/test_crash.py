"""``tether serve --app`` running an Agents SDK agent survives SIGKILL mid-tool."""

import time
from pathlib import Path

import httpx

from ...cli.conftest import start_server
from .scripted import LOG_ENV

APP = "tests.integrations.openai_agents.app:agents"
PATH = "/agents/helper/me"


def _records(url: str) -> list[dict[str, object]]:
    response = httpx.get(f"{url}{PATH}/records", params={"limit": 1000}, timeout=10)
    response.raise_for_status()
    records: list[dict[str, object]] = response.json()["records"]
    return records


def test_sigkill_mid_tool_then_restart_settles_once_without_repeating_a_model_call(
    tmp_path: Path,
) -> None:
    data, log, calls = tmp_path / "data", tmp_path / "serve.log", tmp_path / "model-calls"
    env = {LOG_ENV: str(calls)}
    first = start_server(
        data, log, "--lease", "1", app=APP, TETHER_TEST_OA_TOOL_SECONDS="30", **env
    )
    accepted = httpx.post(f"{first.url}{PATH}", json={"body": "weather Oslo"}, timeout=10).json()
    deadline = time.monotonic() + 30
    while not any(r["kind"] == "tool_called" for r in _records(first.url)):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    first.kill()
    before = calls.read_text().splitlines()
    assert len(before) == 1  # the model asked for the tool; its completion is recorded

    second = start_server(
        data, log, "--lease", "1", app=APP, TETHER_TEST_OA_TOOL_SECONDS="0", **env
    )
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
    assert settled["settlement"]["result"] == "done: sunny in Oslo"
    kinds = [r["kind"] for r in records]
    assert kinds.count("submission_settled") == 1
    assert kinds.count("model_called") == 2
    after = calls.read_text().splitlines()
    assert after[: len(before)] == before and len(after) == 2
    assert len(set(after)) == len(after), "a recorded model call was requested again"
