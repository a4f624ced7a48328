"""``tether usage``: the flags become the query of ``GET /usage`` and its answer is shown
amount by amount against the budget; ``--store`` reads the store's aggregate directly;
``--session`` asks for a session's spending against its session budget."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app
from tether.messages import Message, Usage
from tether.records import AssistantMessageCompleted, RecordDraft
from tether.store import NewSubmission, SessionKey, SqliteStore

from .answered import answered_by

REPORT = {
    "tenant": "acme",
    "period": "day",
    "start": "2026-12-07T00:00:00Z",
    "end": "2026-12-08T00:00:00Z",
    "spent": {"modelCalls": 3, "tokens": 1200, "costUsd": 0.01, "toolCalls": 2},
    "budget": {"modelCalls": 100, "tokens": None, "costUsd": 5.0, "toolCalls": None},
    "remaining": {"modelCalls": 97, "tokens": None, "costUsd": 4.99, "toolCalls": None},
}

SESSION_REPORT = {
    "conversationId": "01JSESSION",
    "agent": "support",
    "instance": "acme",
    "session": "default",
    "tenant": "acme",
    "spent": {"modelCalls": 4, "tokens": 900, "costUsd": 0.0, "toolCalls": 3},
    "budget": {"modelCalls": 10, "tokens": None, "costUsd": None, "toolCalls": None},
    "remaining": {"modelCalls": 6, "tokens": None, "costUsd": None, "toolCalls": None},
    "submission": {
        "submissionId": "01JRUN",
        "spent": {"modelCalls": 1, "tokens": 300, "costUsd": 0.0, "toolCalls": 1},
        "budget": {"modelCalls": 2, "tokens": None, "costUsd": None, "toolCalls": 1},
        "remaining": {"modelCalls": 1, "tokens": None, "costUsd": None, "toolCalls": 0},
    },
}


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if "session" in request.url.params:
            return httpx.Response(200, json=SESSION_REPORT)
        if request.url.params.get("tenant") == "globex":
            error = {"type": "tenant_not_found", "message": "tenant globex not found"}
            return httpx.Response(404, json={"error": error})
        return httpx.Response(200, json=REPORT)

    answered_by(monkeypatch, answer)
    return requests


def test_usage_shows_the_spending_against_the_budget(asked: list[httpx.Request]) -> None:
    result = CliRunner().invoke(app, ["usage", "--tenant", "acme", "--at", "2026-12-07"])
    assert result.exit_code == 0, result.output
    [request] = asked
    assert request.url.path == "/usage"
    assert dict(request.url.params) == {"period": "day", "tenant": "acme", "at": "2026-12-07"}
    assert result.output.splitlines() == [
        "acme, day 2026-12-07T00:00:00Z .. 2026-12-08T00:00:00Z",
        "model calls  3 of 100 (97 left)",
        "tokens       1200",
        "USD          0.01 of 5 (4.99 left)",
        "tool calls   2",
    ]
    month = CliRunner().invoke(app, ["usage", "--period", "month"])
    assert month.exit_code == 0 and dict(asked[1].url.params) == {"period": "month"}


def test_usage_fails_in_one_line(asked: list[httpx.Request]) -> None:
    foreign = CliRunner().invoke(app, ["usage", "--tenant", "globex"])
    assert foreign.exit_code != 0 and "tenant globex not found" in foreign.output
    assert CliRunner().invoke(app, ["usage", "--at", "tomorrow"]).exit_code == 2
    assert CliRunner().invoke(app, ["usage", "--period", "week"]).exit_code == 2
    assert CliRunner().invoke(app, ["usage", "--store", "sqlite:///x"]).exit_code == 2


def test_usage_reads_a_store(tmp_path: Path) -> None:
    async def fill() -> None:
        async with await SqliteStore.open(tmp_path) as store:
            new = NewSubmission(
                id="s1",
                key=SessionKey("a", "i", "default"),
                conversation_id="c1",
                input={"kind": "user", "body": "hi"},
                created_at=datetime(2026, 12, 7, tzinfo=UTC),
                tenant="acme",
            )
            await store.admit(new)
            done = AssistantMessageCompleted(
                call_id="m1",
                message=Message.assistant("ok"),
                usage=Usage(input_tokens=30, output_tokens=12),
                cost=0.5,
            )
            draft = RecordDraft(done, time="2026-12-07T10:00:00.000000Z")
            await store.append("c1", [draft], expected_seq=await store.head("c1"), fence=0)

    asyncio.run(fill())
    url = f"sqlite:///{tmp_path}"
    args = ["usage", "--store", url, "--tenant", "acme", "--at", "2026-12-07"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "acme, day 2026-12-07T00:00:00Z .. 2026-12-08T00:00:00Z",
        "model calls  1",
        "tokens       42",
        "USD          0.5",
        "tool calls   0",
        "no budget",
    ]
    other_day = CliRunner().invoke(app, [*args[:-1], "2026-12-08"])
    assert "model calls  0" in other_day.output
    month = CliRunner().invoke(app, [*args, "--period", "month"])
    assert "2026-12-01T00:00:00Z .. 2027-01-01T00:00:00Z" in month.output


def test_usage_shows_a_sessions_spending(asked: list[httpx.Request]) -> None:
    result = CliRunner().invoke(app, ["usage", "--session", "01JSESSION"])
    assert result.exit_code == 0, result.output
    [request] = asked
    assert request.url.path == "/usage" and dict(request.url.params) == {"session": "01JSESSION"}
    assert result.output.splitlines() == [
        "support/acme/default (01JSESSION), all its submissions",
        "model calls  4 of 10 (6 left)",
        "tokens       900",
        "USD          0",
        "tool calls   3",
        "open submission 01JRUN",
        "  model calls  1 of 2 (1 left)",
        "  tokens       300",
        "  USD          0",
        "  tool calls   1 of 1 (0 left)",
    ]
    for extra in (["--tenant", "acme"], ["--period", "day"], ["--at", "2026-12-07"]):
        refused = CliRunner().invoke(app, ["usage", "--session", "01JSESSION", *extra])
        assert refused.exit_code == 2 and extra[0] in refused.output
    assert len(asked) == 1
