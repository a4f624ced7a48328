"""``tether webhooks``: ``list`` is a table of the deliveries with their last answer,
``show`` prints one as JSON, ``resend`` names what it sends again; refusals are one line.
The last test runs them against a real ``tether serve``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app

from ..processes import eventually, free_port
from .answered import answered_by
from .command import tether
from .conftest import start_server

pytestmark = pytest.mark.process

FAILED = {
    "id": "wh_0123",
    "url": "https://example.com/hooks",
    "event": "settled",
    "status": "failed",
    "agent": "assistant",
    "instance": "me",
    "session": "default",
    "submissionId": "sub-1",
    "attempts": 10,
    "createdAt": "2026-01-05T09:00:00+00:00",
    "events": ["settled"],
    "lastStatus": 500,
    "lastError": "answered HTTP 500",
}


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """The requests the commands send, answered as a server would."""
    requests: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if request.url.path.endswith("/wh_gone") or request.url.path.endswith("/wh_gone/resend"):
            error = {"type": "webhook_not_found", "message": "no webhook delivery 'wh_gone'"}
            return httpx.Response(404, json={"error": error})
        if request.method == "POST":
            return httpx.Response(200, json={**FAILED, "status": "pending", "attempts": 0})
        if request.url.path == "/webhook-deliveries":
            return httpx.Response(200, json={"deliveries": [FAILED], "nextCursor": "wh_0123"})
        return httpx.Response(200, json={**FAILED, "payload": {"id": "wh_0123"}})

    answered_by(monkeypatch, answer)
    return requests


def test_the_list_is_a_table_with_the_last_answer(asked: list[httpx.Request]) -> None:
    args = ["webhooks", "list", "--status", "failed", "--submission", "sub-1", "--limit", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    header, row, more = result.output.splitlines()
    assert header.split() == [
        "id", "event", "status", "attempts", "submission", "url", "last", "next",
    ]  # fmt: skip
    assert row.split()[:6] == ["wh_0123", "settled", "failed", "10", "sub-1", FAILED["url"]]
    assert "answered HTTP 500" in row
    assert more == "more: add --after wh_0123"
    [request] = asked
    assert request.url.path == "/webhook-deliveries"
    assert dict(request.url.params) == {"limit": "1", "status": "failed", "submissionId": "sub-1"}


def test_show_prints_json_and_resend_names_the_delivery(asked: list[httpx.Request]) -> None:
    shown = CliRunner().invoke(app, ["webhooks", "show", "wh_0123"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["payload"] == {"id": "wh_0123"}
    resent = CliRunner().invoke(app, ["webhooks", "resend", "wh_0123"])
    assert resent.exit_code == 0, resent.output
    assert resent.output == f"resending wh_0123 (settled) to {FAILED['url']}\n"
    assert [(r.method, r.url.path) for r in asked] == [
        ("GET", "/webhook-deliveries/wh_0123"),
        ("POST", "/webhook-deliveries/wh_0123/resend"),
    ]
    missing = CliRunner().invoke(app, ["webhooks", "resend", "wh_gone"])
    assert missing.exit_code == 1
    assert "404 webhook_not_found" in missing.output


def test_webhooks_against_a_real_server(tmp_path: Path) -> None:
    """A callback to a loopback port nobody listens on: every attempt fails, the CLI lists
    it with the error, shows it, and resends it."""
    server = start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        TETHER_WEBHOOK_SECRET="whsec-cli",
        TETHER_WEBHOOK_ALLOW="127.0.0.0/8",
    )
    try:
        url = ["--url", server.url]
        assert tether("webhooks", "list", *url).stdout == "no webhook deliveries\n"
        hook = f"http://127.0.0.1:{free_port()}/hook"
        sent = httpx.post(
            f"{server.url}/agents/assistant/me",
            json={"body": "hi", "callback": {"url": hook}},
            timeout=30,
        )
        assert sent.status_code == 202, sent.text

        def attempted() -> str | None:
            listed = tether("webhooks", "list", *url).stdout
            return listed if "ConnectError" in listed else None

        listed = eventually(attempted, "a failed attempt listed").splitlines()
        delivery_id, event, status = listed[1].split()[:3]
        assert (event, status) == ("settled", "pending")
        shown = json.loads(tether("webhooks", "show", delivery_id, *url).stdout)
        assert shown["payload"]["submissionId"] == sent.json()["submissionId"]
        assert shown["url"] == hook and shown["attempts"] >= 1
        resent = tether("webhooks", "resend", delivery_id, *url).stdout
        assert resent == f"resending {delivery_id} (settled) to {hook}\n"
        missing = tether("webhooks", "show", "wh_nope", *url, code=1)
        assert "404 webhook_not_found" in missing.error
        refused = httpx.post(
            f"{server.url}/agents/assistant/me",
            json={"body": "hi", "callback": {"url": "http://10.1.1.1/hook"}},
            timeout=30,
        )
        assert refused.status_code == 422
        assert refused.json()["error"]["type"] == "invalid_dispatch"
    finally:
        server.stop()
