"""``tether schedules``: a table of the server's schedules with their next window; ``add``
sends its flags as the definition, ``delete`` names one; refusals are one line. The last
test runs them against a real ``tether serve``."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app

from .answered import answered_by
from .command import tether
from .conftest import ServerProcess

pytestmark = pytest.mark.process

LISTED = [
    {
        "id": "heartbeat",
        "agent": "assistant",
        "instance": "me",
        "session": "default",
        "every": 300,
        "timezone": "UTC",
        "kind": "user",
        "body": "beat",
        "missed": "skip",
        "grace": 60,
        "source": "config",
        "nextFireAt": "2026-01-05T09:00:00+00:00",
    },
    {
        "id": "daily",
        "agent": "assistant",
        "instance": "me",
        "session": "news",
        "cron": "30 7 * * *",
        "timezone": "Europe/Paris",
        "kind": "signal",
        "signalType": "digest",
        "body": "go",
        "missed": "catch_up",
        "catchUp": 2,
        "grace": 60,
        "source": "durable",
        "nextFireAt": "2026-01-06T06:30:00+00:00",
        "createdAt": "2026-01-05T08:00:00+00:00",
    },
]


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The requests the commands send, answered as a server would."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"schedules": LISTED})
        if request.method == "POST":
            return httpx.Response(201, json={**LISTED[1], **json.loads(request.content)})
        if request.url.path.endswith("/heartbeat"):
            error = {"type": "schedule_conflict", "message": "it is of the configuration"}
            return httpx.Response(409, json={"error": error})
        return httpx.Response(200, json={"deleted": request.url.path.rsplit("/", 1)[-1]})

    answered_by(monkeypatch, answer)
    return requests


def test_the_list_is_a_table_with_the_next_window(asked: list[httpx.Request]) -> None:
    result = CliRunner().invoke(app, ["schedules"])
    assert result.exit_code == 0, result.output
    header, heartbeat, daily = result.output.splitlines()
    assert header.split() == ["id", "session", "when", "kind", "missed", "source", "next", "fire"]
    assert heartbeat.split() == [
        "heartbeat",
        "assistant/me/default",
        "every",
        "300",
        "s",
        "user",
        "skip",
        "config",
        "2026-01-05",
        "09:00:00Z",
    ]
    assert "30 7 * * * (Europe/Paris)" in daily
    assert "signal digest" in daily and "catch up 2" in daily and "durable" in daily
    assert [(r.method, r.url.path) for r in asked] == [("GET", "/schedules")]


def test_add_sends_its_flags_as_the_definition(asked: list[httpx.Request]) -> None:
    args = ["schedules", "add", "assistant", "me", "--cron", "30 7 * * *", "--body", "go"]
    more = ["--timezone", "Europe/Paris", "--session", "news", "--signal-type", "digest"]
    result = CliRunner().invoke(app, [*args, *more, "--catch-up", "2", "--id", "daily"])
    assert result.exit_code == 0, result.output
    [request] = asked
    assert (request.method, request.url.path) == ("POST", "/schedules")
    assert json.loads(request.content) == {
        "agent": "assistant",
        "instance": "me",
        "session": "news",
        "body": "go",
        "cron": "30 7 * * *",
        "timezone": "Europe/Paris",
        "kind": "signal",
        "signalType": "digest",
        "missed": "catch_up",
        "catchUp": 2,
        "grace": 60.0,
        "id": "daily",
    }
    assert result.output == "added daily: next window 2026-01-06 06:30:00Z\n"


def test_add_takes_exactly_one_of_cron_and_every(asked: list[httpx.Request]) -> None:
    for when in ([], ["--cron", "* * * * *", "--every", "5"]):
        result = CliRunner().invoke(app, ["schedules", "add", "a", "b", "--body", "x", *when])
        assert result.exit_code == 2
    every = ["schedules", "add", "a", "b", "--body", "x", "--every", "5", "--kind", "user"]
    assert CliRunner().invoke(app, every).exit_code == 0
    sent = json.loads(asked[0].content)
    assert sent["every"] == 5 and sent["kind"] == "user" and "signalType" not in sent
    assert sent["missed"] == "skip" and "catchUp" not in sent


def test_delete_names_the_schedule_and_a_refusal_is_one_line(
    asked: list[httpx.Request],
) -> None:
    result = CliRunner().invoke(app, ["schedules", "--url", "http://elsewhere", "delete", "daily"])
    assert result.exit_code == 0, result.output
    assert result.output == "deleted daily\n"
    assert str(asked[0].url) == "http://elsewhere/schedules/daily"
    refused = CliRunner().invoke(app, ["schedules", "delete", "heartbeat"])
    assert refused.exit_code == 1
    assert "409 schedule_conflict: it is of the configuration" in refused.output


def test_schedules_against_a_real_server(server: ServerProcess) -> None:
    url = ["--url", server.url]
    assert tether("schedules", *url).stdout == "no schedules\n"
    added = tether(
        "schedules", "add", "assistant", "me", "--every", "3600", "--body", "hi", "--id", "hourly",
        *url,
    )  # fmt: skip
    assert added.stdout.startswith("added hourly: next window ")
    listed = tether("schedules", *url, real=True).stdout.splitlines()
    assert listed[1].split()[:4] == ["hourly", "assistant/me/default", "every", "3600"]
    conflict = tether(
        "schedules", "add", "assistant", "me", "--every", "60", "--body", "x", "--id", "hourly",
        *url, code=1,
    )  # fmt: skip
    assert "409 schedule_conflict" in conflict.error
    assert tether("schedules", "delete", "hourly", *url).stdout == "deleted hourly\n"
    missing = tether("schedules", "delete", "hourly", *url, code=1)
    assert "404 schedule_not_found" in missing.error
    assert tether("schedules", *url).stdout == "no schedules\n"
