"""``tether sessions --q/--meta/--since`` (issue 43, item 5): the search filters go to
``GET /sessions`` as ``q``, ``metadata.<key>`` and ``since`` through :mod:`tether.client`,
and each session's metadata is shown beside it."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app

from .answered import answered_by

PAGE = {
    "sessions": [
        {
            "agent": "a",
            "instance": "me",
            "session": "s1",
            "conversationId": "c-1",
            "createdAt": "2026-12-07T10:00:00+00:00",
            "lastActivityAt": "2026-12-07T10:00:00+00:00",
            "records": 3,
            "bytes": 512,
            "status": "idle",
            "pendingApprovals": 0,
            "pendingInputs": 0,
            "metadata": {"customer": "acme", "tier": 2},
            "streamUrl": "/agents/a/me?session=s1",
        }
    ],
    "nextCursor": None,
}


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json=PAGE)

    answered_by(monkeypatch, answer)
    return requests


def test_sessions_searches_by_text_metadata_and_time(asked: list[httpx.Request]) -> None:
    arguments = ["sessions", "--q", "refund order", "--meta", "customer=acme"]
    arguments += ["--meta", "tier=2", "--since", "2026-12-01T00:00:00Z"]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    [request] = asked
    assert request.url.path == "/sessions"
    assert request.url.params["q"] == "refund order"
    assert request.url.params["metadata.customer"] == "acme"
    assert request.url.params["metadata.tier"] == "2"
    since = datetime.fromisoformat(request.url.params["since"])
    assert since == datetime(2026, 12, 1, tzinfo=UTC)
    [line] = [line for line in result.output.splitlines() if line.startswith("a/me/s1")]
    assert line.endswith("customer=acme tier=2")


def test_a_meta_filter_is_key_equals_value(asked: list[httpx.Request]) -> None:
    result = CliRunner().invoke(app, ["sessions", "--meta", "customer"])
    assert result.exit_code != 0 and not asked
    assert "KEY=VALUE" in result.output


@pytest.mark.parametrize("since", ["yesterday", "2026-12-01T00:00:00"])
def test_since_is_a_time_with_its_offset(asked: list[httpx.Request], since: str) -> None:
    result = CliRunner().invoke(app, ["sessions", "--since", since])
    assert result.exit_code != 0 and not asked
    assert "--since" in result.output
