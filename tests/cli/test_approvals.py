"""``tether approvals``: its flags become the query of ``GET /approvals``; decided gates show
who decided what, when and why; a full page says how to ask for the next one."""

from __future__ import annotations

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app
from tether.cli._gates import describe_decision
from tether.wire import ApprovalItem

from .answered import answered_by

DECIDED = {
    "approvalId": "c1.4",
    "conversationId": "c1",
    "callId": "k",
    "seq": 4,
    "argsDigest": "d",
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
        "approver": "Ann",
        "by": {"subject": "ann@acme", "tenant": "acme", "display": "Ann"},
    },
    "decidedBy": {"subject": "ann@acme", "tenant": "acme", "display": "Ann"},
}
CLOSED = {
    **{k: v for k, v in DECIDED.items() if k not in ("decision", "decidedAt", "decidedBy")},
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

    answered_by(monkeypatch, answer)
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
    # The name shown, then who decided as the server verified them: subject and tenant.
    assert decided.endswith(
        '-> edit {"to": "amy"} by Ann (ann@acme, acme) at 2026-01-01T00:00:05+00:00: not bob'
    )
    assert closed.endswith("closed at 2026-01-01T00:00:09+00:00")
    assert more == "more: add --cursor Q1"


def test_a_decision_names_whom_the_server_verified_if_anyone() -> None:
    operator = {**DECIDED, "decidedBy": {"subject": "[root]"}}
    assert "by Ann ([root]) at" in describe_decision(ApprovalItem.model_validate(operator))
    anonymous = {k: v for k, v in DECIDED.items() if k != "decidedBy"}
    assert "by Ann at" in describe_decision(ApprovalItem.model_validate(anonymous))


def test_a_verified_name_is_shown_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    page = {"approvals": [{**DECIDED, "decidedBy": {"subject": "[bold]x"}}], "nextCursor": None}

    answered_by(monkeypatch, lambda request: httpx.Response(200, json=page))
    result = CliRunner().invoke(app, ["approvals", "--status", "decided"])
    assert result.exit_code == 0, result.output
    assert "by Ann ([bold]x) at" in result.output  # markup in a subject is not applied


def test_pending_is_the_default(asked: list[httpx.Request]) -> None:
    assert CliRunner().invoke(app, ["approvals"]).exit_code == 0
    assert dict(asked[0].url.params) == {"status": "pending", "limit": "100"}
    assert CliRunner().invoke(app, ["approvals", "--status", "later"]).exit_code == 2
    assert CliRunner().invoke(app, ["approvals", "--limit", "0"]).exit_code == 2
