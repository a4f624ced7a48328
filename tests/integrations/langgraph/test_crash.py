"""``tether serve --app`` running the LangGraph agent survives SIGKILL mid-tool."""

from pathlib import Path

from ..crash import kill_mid_tool
from .app import CALLS_ENV, TOOL_SECONDS_ENV


def test_sigkill_mid_tool_then_restart_settles_once(tmp_path: Path) -> None:
    calls = tmp_path / "calls.log"

    def first_life() -> None:
        assert calls.read_text().splitlines() == ["1:lookup"]

    run = kill_mid_tool(
        tmp_path,
        app="tests.integrations.langgraph.app:agents",
        session="/agents/react/me",
        body="tides",
        slow={TOOL_SECONDS_ENV: "30"},
        fast={TOOL_SECONDS_ENV: "0"},
        env={CALLS_ENV: str(calls)},
        before_restart=first_life,
    )
    assert run.settled["settlement"]["result"] == "answer: facts about tides"
    # The recorded first model call was served from the log; only the second one ran.
    assert calls.read_text().splitlines() == ["1:lookup", "1:answer"]
    assert run.kinds.count("model_called") == 2 and run.kinds.count("tool_called") == 1
    assert run.kinds.count("tool_outcome") == 1  # the idempotent lookup was re-driven once
    contents = [e["content"]["type"] for e in run.events if e["type"] in ("start", "full")]
    assert contents[-3:] == ["tool_request", "tool_response", "text"]
