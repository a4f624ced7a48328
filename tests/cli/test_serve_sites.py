"""``tether serve`` keeps other sites' pages out (issue 36, item 5): it answers only loopback
names, its ``--host`` and the hosts ``--allowed-host`` (or ``TETHER_ALLOWED_HOSTS``) adds;
a change must come from its own origin or one ``--allowed-origin`` adds; every POST says
JSON. The Guard's cases are in tests/http/test_guard_sites.py: these are the flags."""

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tether.cli import app

from .conftest import start_server

pytestmark = pytest.mark.process

TOKEN = "serve-s3cret"


def test_the_flags_reach_the_served_app(tmp_path: Path) -> None:
    server = start_server(
        tmp_path / "data",
        tmp_path / "serve.log",
        "--auth-token",
        TOKEN,
        "--allowed-host",
        "agents.example.com",
        "--sign-in-hours",
        "1.5",
        TETHER_ALLOWED_ORIGINS="https://app.example.com, https://ops.example.com",
    )
    port = server.url.rpartition(":")[2]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with httpx.Client(base_url=server.url, headers=bearer, timeout=30) as client:
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", "agents.example.com"):
                assert client.get("/sessions", headers={"Host": host}).status_code == 200, host
            rebound = client.get("/sessions", headers={"Host": f"rebound.example:{port}"})
            assert rebound.status_code == 421
            assert rebound.json()["error"]["type"] == "misdirected_request"
            abort = "/agents/assistant/me/abort"
            assert client.post(abort).status_code == 415
            assert client.post(abort, json={}).status_code == 200
            for origin in ("https://app.example.com", "https://ops.example.com", server.url):
                sent = client.post(abort, json={}, headers={"Origin": origin})
                assert sent.status_code == 200, origin
            foreign = client.post(abort, json={}, headers={"Origin": "https://evil.example"})
            assert foreign.status_code == 403
            login = client.post("/ui/login", json={"token": TOKEN})
            assert "Max-Age=5400" in login.headers["set-cookie"]
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("option", "value"),
    [("--allowed-host", "http://agents.example.com"), ("--allowed-origin", "app.example.com")],
)
def test_a_bad_host_or_origin_is_refused_before_anything_starts(
    tmp_path: Path, option: str, value: str
) -> None:
    store = f"sqlite:///{tmp_path}/data"
    result = CliRunner().invoke(app, ["serve", "--demo", "--store", store, option, value], env={})
    assert result.exit_code == 2, result.output
    assert option in result.output and value in result.output
    assert not (tmp_path / "data").exists()
