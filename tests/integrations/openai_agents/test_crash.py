"""``tether serve --app`` running an Agents SDK agent survives SIGKILL mid-tool."""

from pathlib import Path

from ..crash import kill_mid_tool
from .scripted import LOG_ENV


def test_sigkill_mid_tool_then_restart_settles_once_without_repeating_a_model_call(
    tmp_path: Path,
) -> None:
    calls = tmp_path / "model-calls"
    before: list[str] = []

    def first_life() -> None:
        before.extend(calls.read_text().splitlines())
        assert len(before) == 1  # the model asked for the tool; its completion is recorded

    run = kill_mid_tool(
        tmp_path,
        app="tests.integrations.openai_agents.app:agents",
        session="/agents/helper/me",
        body="weather Oslo",
        slow={"TETHER_TEST_OA_TOOL_SECONDS": "30"},
        fast={"TETHER_TEST_OA_TOOL_SECONDS": "0"},
        env={LOG_ENV: str(calls)},
        before_restart=first_life,
    )
    assert run.settled["settlement"]["result"] == "done: sunny in Oslo"
    assert run.kinds.count("model_called") == 2
    after = calls.read_text().splitlines()
    assert after[: len(before)] == before and len(after) == 2
    assert len(set(after)) == len(after), "a recorded model call was requested again"
    contents = [e["content"]["type"] for e in run.events if e["type"] in ("start", "full")]
    assert contents[-4:] == ["tool_request", "tool_response", "text", "data"]  # data: settled
