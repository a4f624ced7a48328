"""``tether serve`` survives SIGKILL mid-run (a restart takes the run over and settles it once),
answers without Nagle's delays, and names the extra its tracing needs."""

import asyncio
import socket
import sys
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from tether._extras import install_hint
from tether.cli import app
from tether.cli._exit import ExitCode
from tether.cli._serve import _listen, _require_mcp, _telemetry

from ..processes import eventually
from .conftest import start_server


def _records(url: str, path: str) -> list[dict[str, object]]:
    response = httpx.get(f"{url}{path}/records", params={"limit": 1000}, timeout=30)
    response.raise_for_status()
    records: list[dict[str, object]] = response.json()["records"]
    return records


def test_sigkill_mid_research_then_restart_settles_once(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "serve.log"
    slow = {"TETHER_DEMO_RESEARCH_SECONDS": "30"}
    first = start_server(data, log, "--lease", "1", **slow)
    try:
        accepted = httpx.post(
            f"{first.url}/agents/assistant/me", json={"body": "research tides"}, timeout=30
        ).json()
        path = "/agents/assistant/me"
        eventually(
            lambda: any(r["kind"] == "tool_called" for r in _records(first.url, path)),
            log.read_text,
        )
    finally:
        first.kill()  # mid-tool: the research call is journaled as started, not finished

    second = start_server(data, log, "--lease", "1", TETHER_DEMO_RESEARCH_SECONDS="0.2")
    try:
        settled = httpx.get(
            f"{second.url}/submissions/{accepted['submissionId']}",
            params={"wait": True},
            timeout=90,  # the server holds ?wait for 60 s, then answers with the status
        ).json()
        assert settled["status"] == "settled", settled
        assert "three findings about tides" in str(settled["settlement"]["result"])
        records = _records(second.url, "/agents/assistant/me")
    finally:
        second.stop()
    kinds = [r["kind"] for r in records]
    assert kinds.count("submission_settled") == 1
    attempts = {r["attemptId"] for r in records if r.get("attemptId")}
    assert len(attempts) == 2, attempts
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))


async def test_served_connections_have_nagle_off() -> None:
    """asyncio sets TCP_NODELAY on a connection only if its socket says IPPROTO_TCP; with Nagle
    on, every request of a kept-alive connection waited some 40 ms for a delayed ACK."""
    listener = _listen("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
    try:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        async with asyncio.timeout(30):
            assert await accepted != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_sigterm_stops_the_server_while_a_stream_is_followed(tmp_path: Path) -> None:
    """An open followed stream (a console tab, ``tether tail -f``) does not hold a SIGTERM's
    shutdown until its client leaves: after a short grace the server cuts it and exits."""
    server = start_server(tmp_path / "data", tmp_path / "serve.log")
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as client:
        client.sendall(
            b"GET /agents/assistant/me?follow=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Accept: text/event-stream\r\n\r\n"
        )
        assert client.recv(1024).startswith(b"HTTP/1.1 200")
        server.process.terminate()
        assert server.process.wait(timeout=60) == 0


def test_tracing_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tether.otel", None)
    with pytest.raises(typer.BadParameter) as raised, _telemetry("http://127.0.0.1:4318"):
        pass
    assert str(raised.value).startswith(f"{install_hint('otel')}: ")


def test_mcp_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve --mcp`` stops before it listens, naming what installs the SDK."""
    monkeypatch.setitem(sys.modules, "mcp", None)
    monkeypatch.setitem(sys.modules, "mcp.server.streamable_http_manager", None)
    with pytest.raises(typer.BadParameter) as raised:
        _require_mcp()
    assert str(raised.value).startswith(f"{install_hint('mcp')}: ")
    assert raised.value.param_hint == "--mcp"


def test_mcp_refuses_an_agent_named_as_an_approvals_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "clash_app.py").write_text(
        "from tether.demo import assistant\n"
        "from tether.engine import AgentDefinition\n\n"
        "def agents():\n"
        "    return {'approve': AgentDefinition(assistant)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["serve", "--app", "clash_app:agents", "--mcp", "--store", "memory://", "--port", "0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == ExitCode.BAD_APP, result.output
    assert "the agent 'approve' has the name of an approvals tool" in result.output
