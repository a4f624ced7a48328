"""``tether inputs`` and ``tether answer``: the flags become the query of ``GET /inputs``,
an answer is JSON when it parses and text otherwise; answered inputs show what, who and
when. Against a served app: a run that asks parks, ``send --wait`` says how to answer it,
and the answer resumes it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from tether.cli import app
from tether.cli._inputs import describe_answer
from tether.cli._render import SessionRenderer, frames
from tether.wire import InputItem

from .answered import answered_by, wire_record
from .command import tether
from .conftest import ServerProcess, start_server

pytestmark = pytest.mark.process

ASKING = "tests.cli.asking:agents"
ANSWERED = {
    "inputId": "c1.4",
    "conversationId": "c1",
    "seq": 4,
    "agent": "asker",
    "instance": "me",
    "session": "default",
    "callId": "ask-1",
    "tool": "ask",
    "args": {},
    "prompt": "What is\nyour name?",
    "schema": {"type": "string"},
    "status": "answered",
    "answer": "Ann [the first]",
    "responder": "ann",
    "answeredAt": "2026-01-01T00:00:05+00:00",
    "decidedBy": {"subject": "ann@acme", "tenant": "acme"},
}
CLOSED = {
    **{
        k: v
        for k, v in ANSWERED.items()
        if k not in ("answer", "responder", "answeredAt", "decidedBy")
    },
    "inputId": "c2.4",
    "prompt": "x" * 300,
    "status": "closed",
    "closedAt": "2026-01-01T00:00:09+00:00",
}
del CLOSED["schema"]


@pytest.fixture
def asking(tmp_path: Path) -> Iterator[ServerProcess]:
    """``tether serve`` with an agent that asks for a name (tests/cli/asking.py)."""
    started = start_server(tmp_path / "data", tmp_path / "serve.log", app=ASKING)
    yield started
    started.stop()


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The requests the command sends: a page that has a next one, or an answer's receipt."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.method == "POST":
            answered = wire_record("input_answered", 5, inputId="c1.4", callId="k", responder="cli")
            return httpx.Response(200, json={"inputId": "c1.4", "answer": answered})
        return httpx.Response(200, json={"inputs": [ANSWERED, CLOSED], "nextCursor": "Q1"})

    answered_by(monkeypatch, answer)
    return requests


def test_flags_are_the_query_and_answers_are_shown(asked: list[httpx.Request]) -> None:
    args = ["inputs", "--status", "all", "--agent", "asker", "--instance", "me"]
    result = CliRunner().invoke(app, [*args, "--limit", "2", "--cursor", "P1"])
    assert result.exit_code == 0, result.output
    [request] = asked
    assert request.url.path == "/inputs"
    assert dict(request.url.params) == {
        "status": "all",
        "agent": "asker",
        "instance": "me",
        "limit": "2",
        "cursor": "P1",
    }
    answered, closed, more = result.output.splitlines()
    assert answered.split()[:3] == ["c1.4", "answered", "asker/me/default"]
    # The prompt on one line, the schema it asks for, the answer as JSON (markup kept as text).
    assert answered.endswith(
        '"What is your name?" (answer: {"type": "string"})'
        '  -> "Ann [the first]" by ann (ann@acme, acme) at 2026-01-01T00:00:05+00:00'
    )
    assert closed.endswith('x…"  closed at 2026-01-01T00:00:09+00:00')
    assert len(closed) < 200
    assert more == "more: add --cursor Q1"


def test_an_answer_names_whom_the_server_verified_if_anyone() -> None:
    operator = {**ANSWERED, "decidedBy": {"subject": "root", "display": "Root"}}
    shown = describe_answer(InputItem.model_validate(operator))
    assert shown.endswith("by ann (root) at 2026-01-01T00:00:05+00:00")
    anonymous = {k: v for k, v in ANSWERED.items() if k != "decidedBy"}
    shown = describe_answer(InputItem.model_validate(anonymous))
    assert shown.endswith("by ann at 2026-01-01T00:00:05+00:00")


def test_pending_is_the_default(asked: list[httpx.Request]) -> None:
    assert CliRunner().invoke(app, ["inputs"]).exit_code == 0
    assert dict(asked[0].url.params) == {"status": "pending", "limit": "100"}
    assert CliRunner().invoke(app, ["inputs", "--status", "decided"]).exit_code == 2
    assert CliRunner().invoke(app, ["inputs", "--limit", "0"]).exit_code == 2


@pytest.mark.parametrize(
    ("typed", "flags", "value"),
    [
        ("Ann", [], "Ann"),
        ("42", [], 42),
        ('"42"', [], "42"),
        ("42", ["--text"], "42"),
        ('{"name": "Ann"}', [], {"name": "Ann"}),
        ("null", [], None),
        ("{not json", [], "{not json"),
    ],
)
def test_an_answer_is_json_when_it_parses_else_text(
    asked: list[httpx.Request], typed: str, flags: list[str], value: Any
) -> None:
    result = CliRunner().invoke(app, ["answer", "c1.4", typed, *flags, "--responder", "ann"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "answered c1.4"
    [request] = asked
    assert request.method == "POST" and request.url.path == "/inputs/c1.4"
    assert json.loads(request.content) == {"value": value, "responder": "ann"}


def _frame(seq: int, kind: str, payload: dict[str, Any]) -> str:
    record = {"seq": seq, "kind": kind, "payload": payload}
    return f"id: {seq}\nevent: {kind}\ndata: {json.dumps(record)}\n\n"


def test_tail_shows_the_question_and_its_answer() -> None:
    asked = {"inputId": "c1.4", "callId": "ask-1", "tool": "ask", "args": {}}
    answered = {"inputId": "c1.4", "callId": "ask-1", "responder": "ann"}
    stream = (
        _frame(4, "input_requested", {**asked, "prompt": "What is\nyour [b]name[/b]?"})
        + _frame(5, "input_answered", {**answered, "value": {"n": 1}})
        + _frame(5, "input_answered", {**answered, "value": 2})  # sent again: shown once
    )
    out = io.StringIO()
    renderer = SessionRenderer(Console(file=out, soft_wrap=True, emoji=False))
    for frame in frames(stream.splitlines()):
        renderer.feed(frame)
    assert out.getvalue() == (
        '⏸ input c1.4 needed: What is your [b]name[/b]?\n✓ answered by ann: {"n": 1}\n'
    )


def test_a_run_waits_for_its_input_and_the_answer_resumes_it(asking: ServerProcess) -> None:
    url = ("--url", asking.url)
    parked = tether("send", "asker", "me", "hi", "--wait", *url, code=9)
    waiting, command, hint = parked.stdout.splitlines()
    assert waiting == 'waiting for input: "What is your name?" (answer: {"type": "string"})'
    words = command.split("answer it: ", 1)[1].split()
    assert words[:2] == ["tether", "answer"] and words[3:] == ["VALUE", "--url", asking.url]
    input_id = words[2]
    assert "VALUE is JSON if it parses, else text" in hint

    # A message sent behind it waits too, and says what it waits for.
    behind = tether("send", "asker", "me", "hello", "--wait", *url, code=9)
    assert behind.stdout.startswith('queued behind a run waiting for input: "What is your name?"')
    assert input_id in behind.stdout

    [line] = tether("inputs", *url, real=True).stdout.splitlines()
    assert line.split()[:3] == [input_id, "pending", "asker/me/default"]
    assert line.endswith('"What is your name?" (answer: {"type": "string"})')
    assert tether("approvals", *url).stdout.strip() == "no approvals waiting"

    refused = tether("answer", input_id, "42", *url, code=1)  # JSON: a number, not a string
    assert refused.error.startswith("error: 422 invalid_answer: ")
    unknown = tether("answer", f"{input_id}0", "Ann", *url, code=1)
    assert unknown.error.startswith("error: 404 input_not_found: ")

    answered = tether("answer", input_id, "Ann", "--responder", "ann", *url)
    assert answered.stdout.strip() == f"answered {input_id}"
    assert tether("answer", input_id, "Ann", "--responder", "ann", *url).stdout  # idempotent
    conflict = tether("answer", input_id, "Bob", "--responder", "ann", *url, code=1)
    assert conflict.error.startswith("error: 409 input_conflict: ")

    [done] = tether("inputs", "--status", "answered", *url).stdout.splitlines()
    assert done.split()[:3] == [input_id, "answered", "asker/me/default"]
    assert '  -> "Ann" by ann at ' in done
    item = httpx.get(f"{asking.url}/inputs", params={"status": "answered"}, timeout=30).json()
    submission = item["inputs"][0]["submissionId"]
    settled = httpx.get(
        f"{asking.url}/submissions/{submission}", params={"wait": True}, timeout=90
    ).json()
    assert settled["settlement"] == {"status": "succeeded", "result": "Hello, Ann!"}
