"""A durable pydantic-ai agent survives SIGKILL mid-tool: the restarted server resumes it
without requesting a recorded model call again, and streams it in the canonical format."""

import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from ...cli.conftest import start_server

APP = "tests.integrations.pydantic_ai.app:agents"
SESSION = "/agents/helper/me"


def records(url: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}{SESSION}/records", params={"limit": 1000}, timeout=10)
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()["records"]
    return found


def canonical_events(url: str) -> list[dict[str, Any]]:
    events = []
    with httpx.stream("GET", f"{url}{SESSION}", params={"view": "stream"}, timeout=10) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                events.append(orjson.loads(line.removeprefix("data: ")))
    return events


def test_sigkill_mid_tool_then_restart_resumes_without_repeating_the_model(
    tmp_path: Path,
) -> None:
    data, log, calls = tmp_path / "data", tmp_path / "serve.log", tmp_path / "model-calls"
    env = {"TETHER_TEST_MODEL_LOG": str(calls)}
    first = start_server(data, log, "--lease", "1", app=APP, TETHER_TEST_TOOL_SECONDS="30", **env)
    accepted = httpx.post(f"{first.url}{SESSION}", json={"body": "research tides"}, timeout=10)
    deadline = time.monotonic() + 30
    while not any(r["kind"] == "tool_called" for r in records(first.url)):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)
    first.kill()
    assert calls.read_text().splitlines() == ["1"]  # the first model call, recorded

    second = start_server(data, log, "--lease", "1", app=APP, TETHER_TEST_TOOL_SECONDS="0", **env)
    try:
        settled = httpx.get(
            f"{second.url}/submissions/{accepted.json()['submissionId']}",
            params={"wait": True},
            timeout=60,
        ).json()
        assert settled["status"] == "settled", settled
        assert settled["settlement"]["result"] == "done: three facts about tides"
        kinds = [r["kind"] for r in records(second.url)]
        events = canonical_events(second.url)
    finally:
        second.process.terminate()
        second.process.wait(10)
    # Only the answer after the tool was asked of the model on the second life.
    assert calls.read_text().splitlines() == ["1", "3"]
    assert kinds.count("model_called") == 2 and kinds.count("submission_settled") == 1
    contents = [e["content"]["type"] for e in events if e["type"] in ("start", "full")]
    assert contents == ["text", "text", "tool_request", "tool_response", "text"]
    response = next(e for e in events if e.get("content", {}).get("type") == "tool_response")
    assert response["content"]["content"] == "three facts about tides"
