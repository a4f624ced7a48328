"""``tether send --wait`` says when a run parks for approval, and how to decide it."""

import json

import httpx
import orjson
import pytest

from ..processes import eventually
from .command import tether
from .conftest import ServerProcess

pytestmark = pytest.mark.process


def test_send_wait_reports_a_parked_run_and_its_approve_command(server: ServerProcess) -> None:
    url = ("--url", server.url)
    parked = tether("send", "assistant", "me", "email bob@example.com: hi", "--wait", *url, code=9)
    lines = parked.stdout.splitlines()
    # The arguments as the log holds them: canonical JSON, keys sorted.
    assert lines[0] == 'waiting for approval: send_email({"text": "hi", "to": "bob@example.com"})'
    command = lines[1].split("decide it: ", 1)[1].split()
    assert command[:2] == ["tether", "approve"] and command[3:] == ["--url", server.url]

    # A message sent behind it waits too, and says what it waits for.
    behind = tether("send", "assistant", "me", "hello", "--wait", *url, code=9)
    assert behind.stdout.startswith("queued behind a run waiting for approval: send_email(")
    assert command[2] in behind.stdout

    assert tether(*command[1:]).stdout.strip() == f"approved {command[2]}"
    assert tether("send", "assistant", "me", "hello again", "--wait", *url).stdout.strip() == (
        "You said: hello again"
    )


def test_a_wait_that_times_out_says_where_the_submission_stands(server: ServerProcess) -> None:
    def send(body: str) -> httpx.Response:
        return httpx.post(
            f"{server.url}/agents/assistant/me",
            params={"wait": True, "timeout": 0.5},
            json={"body": body},
            timeout=60,
        )

    parking = send("email bob@example.com: hi")
    assert parking.status_code == 202
    assert parking.json()["status"] in ("queued", "running", "waiting")
    submission = f"{server.url}/submissions/{parking.json()['submissionId']}"
    eventually(lambda: httpx.get(submission, timeout=30).json()["status"] == "waiting", "parked")
    behind = send("hello")  # cannot start before the parked run is decided
    assert behind.status_code == 202
    assert behind.json()["status"] == "queued"


def test_approve_with_edited_arguments(server: ServerProcess) -> None:
    url = ("--url", server.url)
    tether("send", "assistant", "me", "email bob@example.com: hi", "--wait", *url, code=9)
    approval = tether("approvals", *url).stdout.split()[0]
    edited = json.dumps({"to": "amy@example.com", "text": "hi"})
    decided = tether("approve", approval, "--decision", "edit", "--args", edited, *url)
    assert decided.stdout.strip() == f"approved with edited arguments {approval}"
    records = httpx.get(
        f"{server.url}/agents/assistant/me/records", params={"limit": 1000}, timeout=30
    ).json()["records"]
    decision = next(r for r in records if r["kind"] == "approval_decided")
    assert decision["payload"]["args"] == {"to": "amy@example.com", "text": "hi"}
    assert orjson.dumps(decision["payload"]["decision"]) == b'"edit"'


def test_approve_refuses_bad_arguments_in_one_line(server: ServerProcess) -> None:
    url = ("--url", server.url)
    failed = tether("approve", "a-1", "--decision", "edit", "--args", "{to: amy", *url, code=2)
    assert failed.error.startswith("error: --args is not JSON: ")
    failed = tether("approve", "a-1", "--decision", "edit", "--args", "[1]", *url, code=2)
    assert failed.error == "error: --args must be a JSON object, not list"
    failed = tether("approve", "a-1", "--decision", "edit", *url, code=2)
    assert "--decision edit needs --args" in failed.error
    failed = tether("approve", "a-1", "--args", "{}", *url, code=2)
    assert "--args goes with --decision edit only" in failed.error


def test_send_after_schedules_the_message_and_a_bad_delay_is_refused(
    server: ServerProcess,
) -> None:
    url = ("--url", server.url)
    sent = json.loads(tether("send", "assistant", "later", "hello", "--after", "3600", *url).stdout)
    submission = httpx.get(f"{server.url}/submissions/{sent['submissionId']}", timeout=30).json()
    assert submission["status"] == "scheduled" and "dueAt" in submission
    aborted = httpx.post(
        f"{server.url}/submissions/{sent['submissionId']}/abort", json={}, timeout=30
    )
    assert aborted.status_code < 300

    def settlement() -> dict[str, object] | None:
        found = httpx.get(f"{server.url}/submissions/{sent['submissionId']}", timeout=30).json()
        return found.get("settlement")  # type: ignore[no-any-return]

    assert eventually(settlement, "the aborted one settled")["status"] == "aborted"
    refused = tether(
        "send",
        "assistant",
        "later",
        "hi",
        "--after",
        "5",
        "--run-at",
        "2030-01-01T00:00:00Z",
        *url,
        code=1,
    )
    assert "runAt" in refused.stdout + refused.stderr
