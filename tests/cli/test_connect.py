"""The client commands talk to a server through :mod:`tether.client` and nothing else: each
request goes through the :class:`~tether.client.TetherClient` the CLI makes
(``_connect.new_client``), and an error answer ends the command as the client read it."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

import tether.cli
from tether.cli import app

from .answered import answered_by

COMMANDS = [
    ["send", "a", "me", "hi"],
    ["send", "a", "me", "hi", "--wait"],
    ["tail", "a", "me"],
    ["approvals"],
    ["approve", "c1.4", "--decision", "reject"],
    ["inputs"],
    ["answer", "c1.5", "42"],
    ["budgets"],
    ["extend", "c1.9", "--tokens", "100"],
    ["sessions"],
    ["sessions", "upgrade", "--agent", "a", "--from", "v1", "--to", "v2"],
    ["delete", "a", "me"],
    ["agents"],
    ["versions"],
    ["usage"],
    ["usage", "--session", "c1"],
    ["export", "c1"],
    ["schedules"],
    ["schedules", "add", "a", "me", "--body", "tick", "--every", "60"],
    ["schedules", "delete", "s1"],
    ["webhooks", "list", "--status", "failed"],
    ["webhooks", "show", "wh_1"],
    ["webhooks", "resend", "wh_1"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_each_client_command_goes_through_tether_client(
    monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    asked: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        error = {"type": "conversation_not_found", "message": "no such conversation"}
        return httpx.Response(404, json={"error": error})

    answered_by(monkeypatch, refuse)
    result = CliRunner().invoke(app, args)
    assert asked, result.output  # sent by the TetherClient the CLI made, not around it
    assert result.exit_code == 1, result.output
    # The typed error tether.client raised, as one line.
    assert "error: 404 conversation_not_found: no such conversation" in result.output


def test_a_body_the_wire_refuses_is_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(500)

    answered_by(monkeypatch, answer)
    result = CliRunner().invoke(app, ["send", "a", "me", "hi", "--run-at", "tomorrow"])
    assert result.exit_code == 1 and not asked
    assert result.output.startswith("error: invalid_request: runAt: ")


def test_no_cli_module_but_connect_makes_an_http_client() -> None:
    """The CLI's private HTTP client is gone: only ``_connect`` imports httpx (to read how a
    connection failed), every request is a :class:`~tether.client.TetherClient`'s."""
    package = Path(tether.cli.__file__).parent
    assert not (package / "_client.py").exists()
    importing = {
        path.name
        for path in package.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(
            (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
            == "httpx"
            for alias in node.names
        )
    }
    assert importing == {"_connect.py"}
