"""The CLI end to end against a real ``tether serve``: send, approve, tail, records, verify,
replay, fork, each run as the real ``tether`` console script."""

import gc
import json

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from tether.cli import app

from ..processes import eventually
from .command import tether
from .conftest import ServerProcess

pytestmark = pytest.mark.process


def cli(*args: str, code: int = 0) -> str:
    result = tether(*args, code=code, real=True)  # the console script, as the docstring says
    return result.stdout + result.stderr


def test_a_session_from_the_command_line(server: ServerProcess) -> None:
    url, store = ("--url", server.url), ("--store", server.store)
    assert "You said: hello" in cli("send", "assistant", "me", "hello", "--wait", *url)

    receipt = json.loads(cli("send", "assistant", "me", "email bob@example.com: hi", *url))
    # Waited for over HTTP: polling `tether approvals` would start a process each time.
    eventually(
        lambda: httpx.get(f"{server.url}/approvals", timeout=30).json()["approvals"],
        "an approval",
        seconds=30,
    )
    listing = cli("approvals", *url)
    assert "send_email" in listing
    approval_id = listing.split()[0]
    assert cli("approve", approval_id, *url).strip() == f"approved {approval_id}"
    done = httpx.get(
        f"{server.url}/submissions/{receipt['submissionId']}", params={"wait": True}, timeout=30
    ).json()
    assert done["status"] == "settled"
    assert "no approvals waiting" in cli("approvals", *url)
    history = cli("approvals", "--status", "decided", "--agent", "assistant", *url)
    assert history.split()[:2] == [approval_id, "decided"] and "-> approve by cli at" in history
    assert "no approvals" in cli("approvals", "--status", "closed", *url)
    assert "422 invalid_cursor" in cli("approvals", "--cursor", "nope", *url, code=1)

    rendered = cli("tail", "assistant", "me", *url)
    assert "→ send_email" in rendered and "approved by cli" in rendered
    assert rendered.count("settled succeeded") == 2

    conversation = receipt["conversationId"]
    lines = cli("records", conversation, *store).splitlines()
    assert [orjson.loads(line)["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert f"ok: {len(lines)} records verified" in cli("verify", conversation, *store)
    replayed = cli("replay", conversation, "--demo", *store)
    assert "replayed 2 executions; model and tool invocations: 0" in replayed
    assert "forked:" in cli("fork", conversation, "--at", "3", *store)
    signals = [orjson.loads(line) for line in cli("spans", conversation, *store).splitlines()]
    opened, closed = signals
    assert opened["signal"] == "open" and opened["kind"] == "tool"
    assert opened["name"] == "send_email"
    assert opened["input"] == {"to": "bob@example.com", "text": "hi"}
    assert closed["signal"] == "close" and closed["key"] == opened["key"]
    assert closed["is_complete"] is True and closed["is_error"] is False


def test_errors_are_one_line_and_exit_1(server: ServerProcess) -> None:
    failed = tether("send", "nobody", "me", "hi", "--url", server.url, code=1)
    assert failed.error.startswith("error: 404 unknown_agent: ")
    failed = tether("verify", "c-missing", "--store", server.store, code=1)
    assert failed.error.startswith("error: conversation_not_found: ")
    refused = tether("serve", "--demo", "--host", "0.0.0.0", code=2)
    assert "--auth-token" in refused.stderr


def test_a_server_freezes_its_startup_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full collections in a long-running server must not rescan what was imported at start."""
    served: list[int] = []

    async def serve(*args: object, **kwargs: object) -> None:
        served.append(gc.get_freeze_count())

    monkeypatch.setattr("uvicorn.Server.serve", serve)
    monkeypatch.setattr("tether._gc._frozen", False)  # what the freeze taught, forgotten after
    try:
        result = CliRunner().invoke(app, ["serve", "--demo", "--store", "memory://", "--port", "0"])
        assert result.exit_code == 0, result.output
        assert served and served[0] > 0
    finally:
        gc.unfreeze()
