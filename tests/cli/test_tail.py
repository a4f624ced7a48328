"""``tether tail`` reads true: a rejection shows as rejected, each settlement once, and live
progress (SSE ``event: progress``, no ``id:``) as a dim line."""

import io
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from tether.cli._render import SessionRenderer, frames

from ..processes import eventually, free_port, kill, reap, start
from .command import TETHER, read_line, tether
from .conftest import ServerProcess, cli_env

pytestmark = pytest.mark.process


def _rendered(stream: str) -> str:
    out = io.StringIO()
    renderer = SessionRenderer(Console(file=out, soft_wrap=True, emoji=False))
    for frame in frames(stream.splitlines()):
        renderer.feed(frame)
    return out.getvalue()


SETTLED = (
    'id: 9\nevent: submission_settled\ndata: {"seq": 9, "kind": "submission_settled", '
    '"payload": {"status": "succeeded", "result": "hi"}}\n\n'
)


def test_each_record_is_rendered_once() -> None:
    shown = _rendered("retry: 2000\n\n" + SETTLED + ": heartbeat\n\n" + SETTLED)
    assert shown == "✓ settled succeeded\n"


def test_progress_frames_are_rendered_between_records() -> None:
    progress = (
        'event: progress\ndata: {"type": "tool_progress", "conversationId": "c", '
        '"submissionId": "s", "callId": "call-1", "text": "step 1 of 3"}\n\n'
    )
    delta = (
        'id: 4\nevent: assistant_text_delta\ndata: {"seq": 4, "kind": '
        '"assistant_text_delta", "payload": {"text": "thinking"}}\n\n'
    )
    assert _rendered(delta + progress + SETTLED) == (
        "thinking\n… step 1 of 3\n✓ settled succeeded\n"
    )


def test_failures_are_not_ticks() -> None:
    failed = (
        'id: 3\ndata: {"seq": 3, "kind": "submission_settled", '
        '"payload": {"status": "aborted", "error": "aborted while waiting for approval"}}\n\n'
    )
    assert _rendered(failed) == "✗ settled aborted: aborted while waiting for approval\n"


def test_an_abort_says_who_aborted() -> None:
    aborted = (
        'id: 3\ndata: {"seq": 3, "kind": "submission_settled", "payload": {"status": '
        '"aborted", "error": "aborted before it went on", "abortedBy": {"subject": "ann@acme", '
        '"tenant": "acme", "display": "Ann"}}}\n\n'
    )
    assert _rendered(aborted) == (
        "✗ settled aborted: aborted before it went on (aborted by Ann: ann@acme, acme)\n"
    )


def _frame(seq: int, kind: str, submission: str, payload: str) -> str:
    return (
        f'id: {seq}\nevent: {kind}\ndata: {{"seq": {seq}, "kind": "{kind}", '
        f'"submissionId": "{submission}", "payload": {payload}}}\n\n'
    )


def test_a_steer_that_joined_a_run_settles_it_once_on_screen() -> None:
    """The steer's own submission settles too (``{"deliveredTo": run}``): the run it joined
    is what settled, and the steer line already said it arrived."""
    stream = (
        _frame(3, "user_message", "run", '{"body": "research durable execution"}')
        + _frame(
            7,
            "steer_received",
            "run",
            '{"body": "focus on SQLite", "mode": "steer", "sourceSubmissionId": "steer"}',
        )
        + _frame(12, "submission_settled", "run", '{"status": "succeeded", "result": "found"}')
        + _frame(
            13,
            "submission_settled",
            "steer",
            '{"status": "succeeded", "result": {"deliveredTo": "run"}}',
        )
    )
    shown = _rendered(stream)
    assert shown.count("settled") == 1, shown
    assert shown.endswith("steer: focus on SQLite\n✓ settled succeeded\n")


def test_a_version_change_says_which_versions_and_what_changed() -> None:
    change = (
        '{"fromVersion": "v1", "toVersion": "v2", "reason": "upgrade", "divergedAt": 4, '
        '"differs": ["system prompt", "tool schema: send_email"]}'
    )
    assert _rendered(_frame(9, "version_changed", "run", change)) == (
        "⇪ version v1 → v2 (upgrade): system prompt, tool schema: send_email\n"
    )


def _kinds(url: str) -> list[str]:
    """The kinds of the session's records so far."""
    answer = httpx.get(f"{url}/agents/assistant/me/records", params={"limit": 1000}, timeout=30)
    answer.raise_for_status()
    return [record["kind"] for record in answer.json()["records"]]


def test_a_rejection_is_shown_as_rejected(server: ServerProcess) -> None:
    url = ("--url", server.url)
    tether("send", "assistant", "me", "email bob@example.com: hi", "--wait", *url, code=9)
    approval = tether("approvals", *url).stdout.split()[0]
    tether("approve", approval, "--decision", "reject", "--reason", "not now", *url)
    # Waited for over HTTP: polling `tether tail` would start a process each time.
    eventually(lambda: "submission_settled" in _kinds(server.url), "the rejected run settled")
    shown = tether("tail", "assistant", "me", *url).stdout
    assert "✗ rejected by cli: not now" in shown
    assert "✓ rejected" not in shown
    assert "← denied: " in shown
    assert shown.count("settled succeeded") == 1


def test_tail_follow_shows_live_progress(server: ServerProcess) -> None:
    # The research tool reports a step every ~0.1 s (TETHER_DEMO_RESEARCH_SECONDS=0.3).
    follow = start(
        [TETHER, "tail", "assistant", "me", "--follow", "--url", server.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(),
    )
    try:
        deadline = time.monotonic() + 60
        lines: list[str] = []
        while not any(line.startswith("… researching tides") for line in lines):
            assert time.monotonic() < deadline, lines
            # Progress is live, not stored: research again until the stream catches some.
            httpx.post(
                f"{server.url}/agents/assistant/me", json={"body": "research tides"}, timeout=30
            )
            while (line := read_line(follow)) and "settled" not in line:
                lines.append(line.rstrip("\n"))
    finally:
        reap(follow)


def test_tail_follow_outlives_a_server_restart(tmp_path: Path) -> None:
    port, store = free_port(), f"sqlite:///{tmp_path / 'data'}"
    url = f"http://127.0.0.1:{port}"

    def serve() -> subprocess.Popen[str]:
        server = start(
            [TETHER, "serve", "--demo", "--port", str(port), "--store", store],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=cli_env(),
        )
        assert read_line(server).startswith("tether serving"), "no banner"
        return server

    def said(body: str) -> None:
        answer = httpx.post(
            f"{url}/agents/assistant/me", params={"wait": True}, json={"body": body}, timeout=60
        )
        assert answer.json()["status"] == "succeeded"

    def until_settled(tail: subprocess.Popen[str]) -> list[str]:
        lines: list[str] = []
        while "settled" not in (line := read_line(tail)):
            assert line, lines  # the tail exited
            lines.append(line.rstrip("\n"))
        return lines

    first = serve()
    said("hello")
    follow = start(
        [TETHER, "tail", "assistant", "me", "--follow", "--url", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    try:
        assert "You said: hello" in until_settled(follow)
        kill(first)
        second = serve()
        try:
            said("again")
            shown = until_settled(follow)
        finally:
            reap(second)
        assert "You said: again" in shown
        assert not any("hello" in line for line in shown)  # nothing shown twice
    finally:
        reap(follow)
