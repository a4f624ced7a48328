"""``tether approvals``: its flags become the query of ``GET /approvals``; decided gates show
who decided what, when and why; a full page says how to ask for the next one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import _client, app

DECIDED = {
    "approvalId": "c1.4",
    "agent": "assistant",
    "instance": "me",
    "session": "default",
    "tool": "send_email",
    "args": {"to": "bob"},
    "status": "decided",
    "decidedAt": "2026-01-01T00:00:05+00:00",
    "decision": {
        "approvalId": "c1.4",
        "callId": "k",
        "decision": "edit",
        "args": {"to": "amy"},
        "reason": "not bob",
        "approver": "ann",
    },
}
CLOSED = {
    **{k: v for k, v in DECIDED.items() if k not in ("decision", "decidedAt")},
    "approvalId": "c2.4",
    "status": "closed",
    "closedAt": "2026-01-01T00:00:09+00:00",
}


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The requests the command sends, answered with one page that has a next one."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={"approvals": [DECIDED, CLOSED], "nextCursor": "Q1"})

    @contextlib.contextmanager
    def connect(url: str, token: str | None, timeout: float | None = 30.0) -> Iterator[Any]:
        with httpx.Client(base_url=url, transport=httpx.MockTransport(answer)) as client:
            yield client

    monkeypatch.setattr(_client, "connect", connect)
    return requests


def test_flags_are_the_query_and_decisions_are_shown(asked: list[httpx.Request]) -> None:
    args = ["approvals", "--status", "all", "--agent", "assistant", "--tool", "send_email"]
    result = CliRunner().invoke(app, [*args, "--limit", "2", "--cursor", "P1"])
    assert result.exit_code == 0, result.output
    [request] = asked
    assert dict(request.url.params) == {
        "status": "all",
        "agent": "assistant",
        "tool": "send_email",
        "limit": "2",
        "cursor": "P1",
    }
    decided, closed, more = result.output.splitlines()
    assert decided.split()[:3] == ["c1.4", "decided", "assistant/me/default"]
    assert decided.endswith('-> edit {"to": "amy"} by ann at 2026-01-01T00:00:05+00:00: not bob')
    assert closed.endswith("closed at 2026-01-01T00:00:09+00:00")
    assert more == "more: add --cursor Q1"


def test_pending_is_the_default(asked: list[httpx.Request]) -> None:
    assert CliRunner().invoke(app, ["approvals"]).exit_code == 0
    assert dict(asked[0].url.params) == {"status": "pending", "limit": "100"}
    assert CliRunner().invoke(app, ["approvals", "--status", "later"]).exit_code == 2
    assert CliRunner().invoke(app, ["approvals", "--limit", "0"]).exit_code == 2
