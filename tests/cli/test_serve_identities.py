"""Issue 39 as users run it: ``tether tokens create`` issues a token, ``tether serve --auth
tokens`` takes it with its scopes (403 naming a missing one), ``tether tokens revoke`` ends
it on the running server (401); ``tether serve --auth jwt --jwt-key`` takes a signed JWT,
refuses an expired one; ``--auth module:function`` runs an application's own hook."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import jwt
import pytest
from typer.testing import CliRunner

from tether.cli import app

from .conftest import start_server

pytestmark = pytest.mark.process

SECRET = "a shared secret of at least thirty-two bytes"


def _tokens(*args: str) -> str:
    result = CliRunner().invoke(app, ["tokens", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_stored_token_on_a_served_store(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'data'}"
    printed = _tokens(
        "create", "--store", store, "--subject", "support-1", "--tenant", "acme",
        "--scope", "sessions:read", "--scope", "approvals:decide",
    )  # fmt: skip
    token = next(line.split()[-1] for line in printed.splitlines() if line.startswith("token:"))
    token_id = next(line.split()[-1] for line in printed.splitlines() if line.startswith("id:"))
    server = start_server(tmp_path / "data", tmp_path / "serve.log", "--auth", "tokens")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            signed = {"Authorization": f"Bearer {token}"}
            me = client.get("/me", headers=signed).json()
            assert me["subject"] == "support-1" and me["tenant"] == "acme"
            assert client.get("/sessions", headers=signed).status_code == 200
            sent = client.post("/agents/assistant/me", json={"body": "hi"}, headers=signed)
            assert sent.status_code == 403
            assert sent.json()["error"]["details"] == {"scope": "sessions:write"}
            assert client.get("/sessions").status_code == 401
            _tokens("revoke", token_id, "--store", store)
            revoked = client.get("/sessions", headers=signed)
            assert revoked.status_code == 401
            assert revoked.json()["error"]["message"] == "token revoked"
    finally:
        server.stop()


def test_a_jwt_signed_with_the_shared_key(tmp_path: Path) -> None:
    now = int(time.time())
    claims = {"sub": "ann", "tenant": "acme", "scope": "sessions:read openid", "aud": "tether"}
    good = jwt.encode({**claims, "exp": now + 600}, SECRET, algorithm="HS256")
    expired = jwt.encode({**claims, "exp": now - 600}, SECRET, algorithm="HS256")
    server = start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        *("--auth", "jwt", "--jwt-audience", "tether"),
        TETHER_JWT_KEY=SECRET,
    )
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            me = client.get("/me", headers={"Authorization": f"Bearer {good}"})
            assert me.json() == {"subject": "ann", "tenant": "acme", "scopes": ["sessions:read"]}
            late = client.get("/me", headers={"Authorization": f"Bearer {expired}"})
            assert late.status_code == 401 and "expired" in late.json()["error"]["message"]
    finally:
        server.stop()


def test_an_application_hook(tmp_path: Path) -> None:
    (tmp_path / "my_auth.py").write_text(
        "from tether.auth import Identity\n"
        "def authenticate(request):\n"
        "    who = request.headers.get('x-user')\n"
        "    return Identity(who, scopes=frozenset({'sessions:read'})) if who else None\n"
    )
    server = start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        *("--auth", "my_auth:authenticate"),
        PYTHONPATH=str(tmp_path),
    )
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            assert client.get("/me", headers={"X-User": "ann"}).json()["subject"] == "ann"
            assert client.get("/me").status_code == 401
    finally:
        server.stop()


def test_an_application_authorize_hook(tmp_path: Path) -> None:
    (tmp_path / "my_rules.py").write_text(
        "from tether.auth import Identity\n"
        "def authenticate(request):\n"
        "    who = request.headers.get('x-user')\n"
        "    return Identity(who, tenant='acme') if who else None\n"
        "def authorize(identity, action, resource):\n"
        "    if action == 'sessions:read' or resource.owner is None:\n"
        "        return True\n"
        "    return resource.owner.subject == identity.subject\n"
    )
    server = start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        *("--auth", "my_rules:authenticate", "--authorize", "my_rules:authorize"),
        PYTHONPATH=str(tmp_path),
    )
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            ann, bob = {"X-User": "ann"}, {"X-User": "bob"}
            sent = client.post("/agents/assistant/mine?wait=true", json={"body": "hi"}, headers=ann)
            assert sent.status_code == 200, sent.text
            assert client.get("/agents/assistant/mine/records", headers=bob).status_code == 200
            refused = client.delete("/agents/assistant/mine", headers=bob)
            assert refused.status_code == 403
            assert refused.json()["error"]["details"] == {
                "action": "sessions:erase",
                "resource": "session",
            }
            assert client.delete("/agents/assistant/mine", headers=ann).status_code == 200
    finally:
        server.stop()


def test_authorize_needs_auth(tmp_path: Path) -> None:
    (tmp_path / "my_rules.py").write_text(
        "def authorize(identity, action, resource):\n    return True\n"
    )
    result = CliRunner().invoke(
        app,
        ["serve", "--demo", "--store", "memory://", "--authorize", "my_rules:authorize"],
        env={"PYTHONPATH": str(tmp_path)},
    )
    assert result.exit_code == 2, result.output
    assert "--authorize needs --auth" in result.output
