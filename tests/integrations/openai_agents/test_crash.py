"""``tether serve --app`` running an Agents SDK agent survives SIGKILL mid-tool, and while
parked on an approval."""

from pathlib import Path
from typing import Any

import httpx
import pytest

from ...cli.conftest import start_server
from ...processes import eventually
from ..crash import kill_mid_tool
from .scripted import LOG_ENV

pytestmark = pytest.mark.process

APP = "tests.integrations.openai_agents.app:agents"


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
        app=APP,
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


def test_sigkill_while_parked_on_an_approval_then_approved_over_http_after_restart(
    tmp_path: Path,
) -> None:
    """The SDK's human-in-the-loop (``needs_approval``) is a Tether gate: the run parked on it
    survives a SIGKILL of its server, and approving it over HTTP on the next server resumes it
    without asking the model again what the log holds."""
    calls, data, log = tmp_path / "model-calls", tmp_path / "data", tmp_path / "serve.log"
    env = {LOG_ENV: str(calls)}
    first = start_server(data, log, "--lease", "1", app=APP, **env)
    try:
        accepted = httpx.post(
            f"{first.url}/agents/helper/me", json={"body": "email hello"}, timeout=30
        ).json()
        eventually(lambda: bool(_gates(first.url)), log.read_text)
    finally:
        first.kill()
    assert len(calls.read_text().splitlines()) == 1  # the model asked for send_email
    second = start_server(data, log, "--lease", "1", app=APP, **env)
    try:
        [gate] = _gates(second.url)  # still parked on it, with what the model asked
        assert gate["tool"] == "send_email" and gate["status"] == "pending"
        assert gate["args"] == {"to": "bob@example.com", "body": "hello"}
        decided = httpx.post(
            f"{second.url}/approvals/{gate['approvalId']}",
            json={"decision": "approve", "approver": "ann"},
            timeout=30,
        )
        assert decided.status_code == 200, decided.text
        settled = httpx.get(
            f"{second.url}/submissions/{accepted['submissionId']}",
            params={"wait": True},
            timeout=90,
        ).json()
    finally:
        second.stop()
    assert settled["status"] == "settled", (settled, log.read_text())
    assert settled["settlement"]["result"] == "done: sent to bob@example.com: hello"
    lines = calls.read_text().splitlines()
    assert len(lines) == 2 and len(set(lines)) == 2, "a recorded model call was requested again"


def _gates(url: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{url}/approvals", timeout=30)
    response.raise_for_status()
    gates: list[dict[str, Any]] = response.json()["approvals"]
    return gates
