"""``tether send --priority`` sends the priority in the body; without it, none (the agent's
default applies); the server's refusal of a bad one is its one-line error."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app

from .answered import answered_by


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The requests ``send`` makes, answered as a server would (a priority over 1000 is
    refused as the server refuses it)."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if json.loads(request.content).get("priority", 0) > 1000:
            error = {"type": "invalid_request", "message": "priority: at most 1000"}
            return httpx.Response(422, json={"error": error})
        accepted = {"submissionId": "s1", "conversationId": "c1", "session": "default"}
        return httpx.Response(202, json={**accepted, "streamUrl": "/agents/a/me"})

    answered_by(monkeypatch, answer)
    return requests


def test_send_puts_the_priority_in_the_body(asked: list[httpx.Request]) -> None:
    result = CliRunner().invoke(app, ["send", "a", "me", "urgent", "--priority", "50"])
    assert result.exit_code == 0, result.output
    plain = CliRunner().invoke(app, ["send", "a", "me", "later"])
    assert plain.exit_code == 0, plain.output
    assert [json.loads(r.content) for r in asked] == [
        {"body": "urgent", "session": "default", "priority": 50},
        {"body": "later", "session": "default"},
    ]


def test_a_refused_priority_is_the_servers_error(asked: list[httpx.Request]) -> None:
    result = CliRunner().invoke(app, ["send", "a", "me", "urgent", "--priority", "5000"])
    assert result.exit_code != 0
    assert "priority" in result.output
