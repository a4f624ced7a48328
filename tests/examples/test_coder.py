"""``examples.coder``'s runbook against its keyless model: "fix the bug in hello.py" fixes it in
the scratch root through glob, read, edit and bash (in that order in the log), the narration
shows the test run's output line by line, and a replay runs no model and no tool; with
``--approve-bash`` the run parks before the command until it is approved over HTTP; on a
machine without bubblewrap it says so and how to go on (``--sandbox none``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from examples.coder.project import BUG, FIX, PROJECT

from ..tools.support import sandbox_missing
from .runbook import ROOT, WAIT, Example, start_example, until

pytestmark = pytest.mark.process

needs_sandbox = pytest.mark.skipif(
    sandbox_missing() is not None and not os.environ.get("CI"),
    reason=f"bash's sandbox: {sandbox_missing()}",
)

ASK = "fix the bug in hello.py"
TESTS = {"command": "python3 test_hello.py"}
FIXED = PROJECT["hello.py"].replace(BUG, FIX)
# The test run's output, as the narration shows it: one line each, in order.
BASH_LINES = [
    "tool: bash started",
    "bash | ok   test_greets_anyone",
    "bash | ok   test_greets_by_name",
    "bash | ok   test_greets_the_world",
    "bash | 3 passed, 0 failed",
    "tool: bash done",
    "model: Fixed the bug in hello.py",
]


def _in_order(output: str, expected: list[str]) -> None:
    """Each of ``expected`` starts a line of ``output``, in this order."""
    lines = output.splitlines()
    at = [next(i for i, line in enumerate(lines) if line.startswith(text)) for text in expected]
    assert at == sorted(at), output


def _replay(tmp_path: Path, store: str, conversation: str, app: str) -> str:
    """``tether replay`` as the runbook runs it (from a scratch directory: the agents' default
    root is relative to it), with the example importable."""
    cwd = tmp_path / "replay"
    cwd.mkdir(exist_ok=True)
    env = {key: value for key, value in os.environ.items() if key != "TETHER_MODEL"}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-c", "from tether.cli import main; main()", "replay"]
    done = subprocess.run(
        [*command, conversation, "--store", store, "--app", app],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _settled(client: httpx.Client, submission: str) -> dict[str, Any]:
    view: dict[str, Any] = {}

    def done() -> bool:
        nonlocal view
        view = client.get(f"/submissions/{submission}", params={"wait": True}).json()
        return bool(view["status"] == "settled")

    until(done, f"{submission} to settle")
    return view


def _start(tmp_path: Path, *args: str) -> tuple[Example, Path, str]:
    root, store = tmp_path / "workspace", f"sqlite:///{tmp_path / 'data'}"
    server = start_example("coder", store, tmp_path / "coder.log", "--root", str(root), *args)
    return server, root, store


@needs_sandbox
def test_the_coder_runbook(tmp_path: Path) -> None:
    server, root, store = _start(tmp_path)
    assert (root / "hello.py").read_text() == PROJECT["hello.py"]  # seeded, with its bug
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        answer = client.post("/agents/coder/me?wait=true", json={"body": ASK})
        assert answer.status_code == 200
        settled = answer.json()
        records = client.get("/agents/coder/me/records", params={"limit": 1000}).json()
    server.stop()
    assert settled["status"] == "succeeded"
    assert settled["result"].startswith("Fixed the bug in hello.py:")
    assert settled["result"].endswith("The tests pass: 3 passed, 0 failed.")
    assert (root / "hello.py").read_text() == FIXED

    # The tool calls in the log, in order, each with its outcome.
    called = [r["payload"] for r in records["records"] if r["kind"] == "tool_called"]
    assert [(call["tool"], call["args"]) for call in called] == [
        ("glob", {"pattern": "**/*.py"}),
        ("read", {"path": "hello.py"}),
        ("edit", {"path": "hello.py", "old_string": BUG, "new_string": FIX}),
        ("bash", TESTS),
    ]
    outcomes = [r["payload"] for r in records["records"] if r["kind"] == "tool_outcome"]
    assert [outcome["status"] for outcome in outcomes] == ["ok"] * 4
    assert outcomes[-1]["content"].endswith("3 passed, 0 failed\n[exit code 0]")

    # The narration: the model's moves, each tool, and the test run's output line by line.
    output = server.output()
    _in_order(output, ["model: -> glob", "tool: glob started", "tool: glob done"])
    _in_order(output, ["model: -> read", "model: -> edit", "model: -> bash", *BASH_LINES])
    assert "settled: succeeded" in output

    # Offline: the same answer from the log, no model and no tool called, the file as it was.
    replayed = _replay(tmp_path, store, settled["conversationId"], "examples.coder:agents")
    assert settled["result"] in replayed
    assert "replayed 1 executions; model and tool invocations: 0" in replayed
    assert (root / "hello.py").read_text() == FIXED


@needs_sandbox
def test_approve_bash_parks_the_command_until_it_is_approved(tmp_path: Path) -> None:
    server, root, store = _start(tmp_path, "--approve-bash")
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        sent = client.post("/agents/coder/gated", json={"body": ASK})
        assert sent.status_code == 202
        submission = sent.json()["submissionId"]
        pending: list[dict[str, Any]] = []

        def parked() -> bool:
            nonlocal pending
            pending = client.get("/approvals", params={"agent": "coder"}).json()["approvals"]
            return bool(pending)

        until(parked, "the bash call's approval gate")
        (gate,) = pending
        assert (gate["tool"], gate["args"], gate["submissionId"]) == ("bash", TESTS, submission)
        assert (root / "hello.py").read_text() == FIXED  # the edit ran; the command waits
        server.wait_for_output("waiting: approval")
        assert client.get(f"/submissions/{submission}").json()["status"] == "waiting"
        assert "bash |" not in server.output()

        decided = client.post(
            f"/approvals/{gate['approvalId']}", json={"decision": "approve", "approver": "ann"}
        )
        assert decided.status_code == 200
        settlement = _settled(client, submission)["settlement"]
        conversation = sent.json()["conversationId"]
    server.stop()
    assert settlement["status"] == "succeeded"
    assert settlement["result"].endswith("The tests pass: 3 passed, 0 failed.")
    _in_order(server.output(), ["waiting: approval", "approval: approve by ann", *BASH_LINES])

    # Its replay takes the gated agents: how each tool is mediated is part of the input.
    replayed = _replay(tmp_path, store, conversation, "examples.coder:gated_agents")
    assert "model and tool invocations: 0" in replayed


def test_without_bwrap_it_says_so_and_runs_with_sandbox_none(tmp_path: Path) -> None:
    """``bwrap`` is looked up on ``PATH``: an empty one is a machine without it."""
    programs = tmp_path / "no-programs"
    programs.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "TETHER_MODEL"}
    env["PATH"] = str(programs)
    command = [sys.executable, "-m", "examples.coder", "--root", str(tmp_path / "workspace")]
    refused = subprocess.run(
        [*command, "--port", "1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=WAIT
    )
    assert refused.returncode == 2
    assert "apt-get install bubblewrap" in refused.stderr and "--sandbox none" in refused.stderr
    server = start_example(
        "coder",
        f"sqlite:///{tmp_path / 'data'}",
        tmp_path / "coder.log",
        "--root",
        str(tmp_path / "workspace"),
        "--sandbox",
        "none",
    )
    with httpx.Client(base_url=server.url, timeout=WAIT) as client:
        answer = client.post("/agents/coder/me?wait=true", json={"body": ASK}).json()
    server.stop()
    assert answer["result"].endswith("The tests pass: 3 passed, 0 failed.")
    assert "bash runs unsandboxed" in server.output()
