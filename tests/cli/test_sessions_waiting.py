"""``tether sessions`` says what a waiting session waits for beside its status: ``waiting
(limit: agent)``, ``waiting (scheduled)`` (issue 41: queued-for-limit as its own waiting
reason)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app

from .answered import answered_by


def _item(session: str, status: str, **waits: str) -> dict[str, Any]:
    return {
        "agent": "a",
        "instance": "me",
        "session": session,
        "conversationId": f"c-{session}",
        "createdAt": "2026-12-07T10:00:00+00:00",
        "lastActivityAt": "2026-12-07T10:00:00+00:00",
        "records": 3,
        "bytes": 512,
        "status": status,
        "pendingApprovals": 0,
        "pendingInputs": 0,
        "streamUrl": f"/agents/a/me?session={session}",
        **waits,
    }


PAGE = {
    "sessions": [
        _item("held", "waiting", waitReason="limit", heldBy="tenant"),
        _item("later", "waiting", waitReason="scheduled", dueAt="2026-12-08T10:00:00+00:00"),
        _item("busy", "running"),
    ],
    "nextCursor": None,
}


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> None:
    answered_by(monkeypatch, lambda request: httpx.Response(200, json=PAGE))


@pytest.mark.usefixtures("served")
def test_sessions_says_what_a_waiting_session_waits_for() -> None:
    result = CliRunner().invoke(app, ["sessions"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines()[1:]}
    assert "waiting (limit: tenant)" in lines["a/me/held"]
    assert "waiting (scheduled)" in lines["a/me/later"]
    assert lines["a/me/busy"].split()[2] == "running"
