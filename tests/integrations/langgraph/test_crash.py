"""``tether serve --app`` running the LangGraph agents in real processes: a SIGKILL mid-tool
or while parked on an interrupt, and a graph's state carried from one server process to the
next."""

from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.integrations.langgraph._state import STATE_STEP

from ...cli.conftest import start_server
from ...fakes.openai_server import Answer, FakeOpenAI
from ...processes import eventually
from ..crash import kill_mid_tool
from .app import CALLS_ENV, TOOL_SECONDS_ENV

pytestmark = pytest.mark.process


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
    assert contents[-4:] == ["tool_request", "tool_response", "text", "data"]  # data: settled


def _submit(url: str, body: str) -> dict[str, Any]:
    accepted = httpx.post(f"{url}/agents/counter/me", json={"body": body}, timeout=30).json()
    settled: dict[str, Any] = httpx.get(
        f"{url}/submissions/{accepted['submissionId']}", params={"wait": True}, timeout=90
    ).json()
    assert settled["status"] == "settled", settled
    return settled


def test_the_state_survives_a_new_process(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "serve.log"
    for body in ("tides", "moons"):  # one server process per submission
        server = start_server(data, log, app="tests.integrations.langgraph.app:counter_agents")
        try:
            settled = _submit(server.url, body)
            records = httpx.get(
                f"{server.url}/agents/counter/me/records", params={"limit": 1000}, timeout=30
            ).json()["records"]
        finally:
            server.stop()
        assert settled["settlement"]["result"] == f"echo: {body}", log.read_text()
    steps = [
        r["payload"]["value"]
        for r in records
        if r["kind"] == "step_recorded" and r["payload"]["name"] == STATE_STEP
    ]
    assert steps == [{"count": 1, "topics": ["tides"]}, {"count": 2, "topics": ["tides", "moons"]}]


def _pending(url: str, log: Path, after: int = 0) -> dict[str, Any]:
    def pending() -> dict[str, Any] | None:
        inputs = httpx.get(f"{url}/inputs", timeout=30).json()["inputs"]
        if inputs and inputs[0]["seq"] > after:
            [item] = inputs
            return dict(item)
        return None

    return eventually(pending, log.read_text)


def test_sigkill_while_parked_on_an_interrupt_then_restart_resumes(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "serve.log"
    app = "tests.integrations.langgraph.app:review_agents"
    with FakeOpenAI([Answer(text="Dear team"), Answer(text="Sent.")]) as fake:
        env = {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "fake"}
        first = start_server(data, log, "--lease", "1", app=app, **env)
        try:
            accepted = httpx.post(
                f"{first.url}/agents/review/me", json={"body": "Tell the team."}, timeout=30
            ).json()
            asked = _pending(first.url, log)
        finally:
            first.kill()  # parked on the question: nothing of the run is in this process
        second = start_server(data, log, "--lease", "1", app=app, **env)
        try:
            assert _pending(second.url, log) == asked  # the question outlived the process
            answer = {"value": "send", "responder": "ann"}
            httpx.post(f"{second.url}/inputs/{asked['inputId']}", json=answer, timeout=30)
            note = _pending(second.url, log, after=asked["seq"])
            answer = {"value": "cc legal", "responder": "ann"}
            httpx.post(f"{second.url}/inputs/{note['inputId']}", json=answer, timeout=30)
            settled = httpx.get(
                f"{second.url}/submissions/{accepted['submissionId']}",
                params={"wait": True},
                timeout=90,
            ).json()
        finally:
            second.stop()
        assert fake.count == 2  # the draft was served from the log after the restart
        told = fake.requests[1].body["messages"][-1]["content"]
    assert settled["settlement"]["result"] == "Sent.", log.read_text()
    assert asked["prompt"] == '{"draft":"Dear team","question":"Send this draft?"}'
    assert told == "The reviewer says send: cc legal"
