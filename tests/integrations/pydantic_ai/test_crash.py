"""A durable pydantic-ai agent survives SIGKILL mid-tool: the restarted server resumes it
without requesting a recorded model call again, and streams it in the canonical format."""

from pathlib import Path

import pytest

from ..crash import kill_mid_tool


def test_sigkill_mid_tool_then_restart_resumes_without_repeating_the_model(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "model-calls"

    def first_life() -> None:
        assert calls.read_text().splitlines() == ["1"]  # the first model call, recorded

    run = kill_mid_tool(
        tmp_path,
        app="tests.integrations.pydantic_ai.app:agents",
        session="/agents/helper/me",
        body="research tides",
        slow={"TETHER_TEST_TOOL_SECONDS": "30"},
        fast={"TETHER_TEST_TOOL_SECONDS": "0"},
        env={"TETHER_TEST_MODEL_LOG": str(calls)},
        before_restart=first_life,
    )
    assert run.settled["settlement"]["result"] == "done: three facts about tides"
    # Only the answer after the tool was asked of the model on the second life.
    assert calls.read_text().splitlines() == ["1", "3"]
    assert run.kinds.count("model_called") == 2
    contents = [e["content"]["type"] for e in run.events if e["type"] in ("start", "full")]
    assert contents == ["text", "text", "tool_request", "tool_response", "text", "data"]
    response = next(e for e in run.events if e.get("content", {}).get("type") == "tool_response")
    assert response["content"]["content"] == "three facts about tides"


@pytest.mark.parametrize("drive", ["iter", "run_stream", "run_stream_events"])
def test_sigkill_mid_tool_resumes_an_agent_driven_another_way(tmp_path: Path, drive: str) -> None:
    calls = tmp_path / "model-calls"
    run = kill_mid_tool(
        tmp_path,
        app="tests.integrations.pydantic_ai.app:agents",
        session="/agents/helper/me",
        body="look up tides",
        slow={"TETHER_TEST_TOOL_SECONDS": "30"},
        fast={"TETHER_TEST_TOOL_SECONDS": "0"},
        env={"TETHER_TEST_MODEL_LOG": str(calls), "TETHER_TEST_DRIVE": drive},
    )
    assert run.settled["settlement"]["result"] == "done: three facts about tides"
    assert calls.read_text().splitlines() == ["1", "3"]  # the recorded call was not repeated
    assert run.kinds.count("model_called") == 2
