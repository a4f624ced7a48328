"""``tether budgets`` and ``tether extend``: the flags become the query of ``GET /budgets``,
the amounts the extension of ``POST /budgets/{id}`` (or ``--reject``); a decided gate shows
what was granted, by whom and when."""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
from rich.console import Console
from typer.testing import CliRunner

from tether.cli import app
from tether.cli._render import SessionRenderer, frames

from .answered import answered_by, wire_record

PENDING = {
    "gateId": "c1.12",
    "conversationId": "c1",
    "seq": 12,
    "agent": "a",
    "instance": "me",
    "session": "default",
    "limit": "costUsd",
    "used": 2.0004,
    "max": 2.0,
    "spent": {"modelCalls": 31, "costUsd": 2.0004},
    "budget": {"costUsd": 2.0, "onExhausted": "park"},
    "scope": "session",
    "status": "pending",
}
DECIDED = {
    **PENDING,
    "gateId": "c1.9",
    "limit": "modelCalls",
    "used": 5,
    "max": 5,
    "scope": "submission",
    "status": "decided",
    "decision": "approve",
    "extension": {"modelCalls": 3},
    "approver": "ops",
    "decidedAt": "2026-01-01T00:00:05+00:00",
}


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.method == "POST":
            decided = wire_record(
                "budget_decided", 13, gateId="c1.12", decision="approve", approver="cli"
            )
            return httpx.Response(200, json={"gateId": "c1.12", "decision": decided})
        return httpx.Response(200, json={"budgets": [PENDING, DECIDED], "nextCursor": "Q1"})

    answered_by(monkeypatch, answer)
    return requests


def test_budgets_lists_spent_against_the_limit(asked: list[httpx.Request]) -> None:
    result = CliRunner().invoke(app, ["budgets", "--status", "all", "--agent", "a"])
    assert result.exit_code == 0, result.output
    [request] = asked
    assert request.url.path == "/budgets"
    assert dict(request.url.params) == {"status": "all", "agent": "a", "limit": "100"}
    pending, decided, more = result.output.splitlines()
    assert pending.split()[:3] == ["c1.12", "pending", "a/me/default"]
    assert pending.endswith("costUsd 2.0004 of 2 (session)")
    assert decided.endswith(
        'modelCalls 5 of 5  -> approve +{"modelCalls": 3} by ops at 2026-01-01T00:00:05+00:00'
    )
    assert more == "more: add --cursor Q1"


def test_extend_sends_the_amounts_and_reject_none(asked: list[httpx.Request]) -> None:
    args = ["extend", "c1.12", "--model-calls", "5", "--cost-usd", "1.5", "--reason", "ok"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(asked[0].content) == {
        "decision": "approve",
        "extension": {"modelCalls": 5, "costUsd": 1.5},
        "reason": "ok",
        "approver": "cli",
    }
    assert asked[0].url.path == "/budgets/c1.12"
    assert CliRunner().invoke(app, ["extend", "c1.12", "--reject"]).exit_code == 0
    assert json.loads(asked[1].content)["decision"] == "reject"
    assert "extension" not in json.loads(asked[1].content)
    assert CliRunner().invoke(app, ["extend", "c1.12"]).exit_code == 2
    assert CliRunner().invoke(app, ["extend", "c1.12", "--reject", "--tokens", "1"]).exit_code == 2


def _frame(seq: int, kind: str, payload: dict[str, Any]) -> str:
    record = {"seq": seq, "kind": kind, "payload": payload}
    return f"id: {seq}\nevent: {kind}\ndata: {json.dumps(record)}\n\n"


def test_tail_shows_the_wait_for_budget_and_its_decision() -> None:
    requested = {"gateId": "c1.9", "limit": "tokens", "used": 450.0, "max": 400.0}
    stream = _frame(
        9, "budget_requested", {**requested, "spent": {}, "budget": {}, "scope": "session"}
    ) + _frame(
        10,
        "budget_decided",
        {"gateId": "c1.9", "decision": "approve", "extension": {"tokens": 100}, "approver": "ops"},
    )
    out = io.StringIO()
    renderer = SessionRenderer(Console(file=out, soft_wrap=True, emoji=False))
    for frame in frames(stream.splitlines()):
        renderer.feed(frame)
    assert out.getvalue() == (
        '⏸ budget c1.9: tokens 450 of 400 used (session)\n✓ budget approve {"tokens": 100} by ops\n'
    )
