"""``tether serve --mcp`` as an MCP client meets it: the SDK's own streamable-HTTP client
(``mcp.client.streamable_http``) against a real server process on 127.0.0.1, running the
demo's keyless model. Each agent is a tool that answers with the run's reply and reports its
canonical stream as progress; a run that waits for an approval says so, and the approvals
tools decide it; a token's scopes and tenant hold as on the HTTP routes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from tether.cli import app

from ..mcp_client import Heard, connected, structured, text, tool_names
from .conftest import start_server

pytestmark = pytest.mark.process


async def test_the_demo_agents_as_tools_and_an_approval_round_trip(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", tmp_path / "serve.log", "--mcp")
    try:
        async with connected(server.url) as session:
            listed = (await session.list_tools()).tools
            assert [tool.name for tool in listed] == [
                "assistant",
                "researcher",
                "list_approvals",
                "approve",
                "reject",
            ]
            [assistant] = [tool for tool in listed if tool.name == "assistant"]
            assert assistant.input_schema["required"] == ["message"]
            assert set(assistant.input_schema["properties"]) == {"message", "sessionId", "instance"}

            heard = Heard()
            answered = await session.call_tool(
                "assistant", {"message": "research tides"}, progress_callback=heard
            )
            assert not answered.is_error
            reply = structured(answered)
            assert reply["status"] == "succeeded"
            assert "three findings about tides" in reply["answer"] == text(answered)
            assert heard.messages[0].startswith(f"admitted as submission {reply['submissionId']}")
            assert 'calling research {"topic": "tides"}' in heard.messages
            assert "researching tides: step 1 of 3" in heard.messages  # the tool's own
            assert any(message.startswith("research answered: ") for message in heard.messages)
            assert "three findings about tides" in heard.messages[-1]

            # The same session goes on: the agent reads its history (and the log says so).
            again = await session.call_tool(
                "assistant", {"message": "email bob: hi", "sessionId": reply["sessionId"]}
            )
            waiting = structured(again)
            assert not again.is_error and waiting["status"] == "waiting"
            assert waiting["sessionId"] == reply["sessionId"]
            [gate] = waiting["waits"]
            assert gate["kind"] == "approval" and gate["tool"] == "send_email"
            assert f"approval {gate['id']} of send_email" in text(again)

            inbox = structured(await session.call_tool("list_approvals", {}))
            assert [item["approvalId"] for item in inbox["approvals"]] == [gate["id"]]

            heard = Heard()
            decided = await session.call_tool(
                "approve", {"approvalId": gate["id"], "reason": "fine"}, progress_callback=heard
            )
            assert structured(decided)["status"] == "succeeded"
            assert text(decided) == "Email sent: dry-run email to bob: hi"
            assert "the tool answered: dry-run email to bob: hi" in heard.messages
            assert structured(await session.call_tool("list_approvals", {}))["approvals"] == []

            refused = await session.call_tool("assistant", {"message": "", "extra": 1})
            assert refused.is_error
            assert text(refused).startswith("invalid_arguments: message: ")
            assert "extra: Extra inputs are not permitted" in text(refused)
            with pytest.raises(MCPError, match="no tool named 'nobody'"):
                await session.call_tool("nobody", {})
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            path = f"/conversations/{reply['sessionId']}/verify"
            assert (await client.get(path)).status_code == 200
    finally:
        server.stop()


async def test_a_cancelled_call_leaves_the_run_going(tmp_path: Path) -> None:
    """The client gives up (MCP's cancel notification): the durable run is not aborted,
    and settles as it would have; the first progress message said where it runs."""
    server = start_server(
        tmp_path / "data", tmp_path / "serve.log", "--mcp", TETHER_DEMO_RESEARCH_SECONDS="2"
    )
    try:
        async with connected(server.url) as session:
            heard = Heard()
            with anyio.move_on_after(60) as scope:

                async def cancel_once_admitted(
                    progress: float, total: float | None, message: str | None
                ) -> None:
                    await heard(progress, total, message)
                    scope.cancel()

                await session.call_tool(
                    "assistant",
                    {"message": "research eels"},
                    progress_callback=cancel_once_admitted,
                )
            assert scope.cancelled_caught
            submission = heard.messages[0].split()[3]
            # The session goes on serving calls after the cancel.
            assert "researcher" in await tool_names(session)
        async with httpx.AsyncClient(base_url=server.url, timeout=90) as client:
            waited = await client.get(f"/submissions/{submission}", params={"wait": True})
            settled = waited.json()
        assert settled["status"] == "settled", settled
        assert settled["settlement"]["status"] == "succeeded"
        assert "three findings about eels" in str(settled["settlement"]["result"])
    finally:
        server.stop()


def _token(store: str, subject: str, tenant: str, *scopes: str) -> str:
    flags = [part for scope in scopes for part in ("--scope", scope)]
    result = CliRunner().invoke(
        app,
        ["tokens", "create", "--store", store, "--subject", subject, "--tenant", tenant, *flags],
    )
    assert result.exit_code == 0, result.output
    return next(
        line.split()[-1] for line in result.output.splitlines() if line.startswith("token:")
    )


async def test_tokens_scopes_and_tenants_hold_over_mcp(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'data'}"
    everything = ("sessions:read", "sessions:write", "approvals:read", "approvals:decide")
    # The CLI runs its own event loop: in a thread of its own, as in a shell.
    acme = await asyncio.to_thread(_token, store, "ann", "acme", *everything)
    globex = await asyncio.to_thread(_token, store, "gus", "globex", *everything)
    reader = await asyncio.to_thread(_token, store, "rita", "acme", "sessions:read")
    server = start_server(tmp_path / "data", tmp_path / "serve.log", "--mcp", "--auth", "tokens")
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            unsigned = await client.post("/mcp", json=initialize)
            assert unsigned.status_code == 401
            assert unsigned.json()["error"]["type"] == "unauthorized"
        with pytest.raises(ExceptionGroup) as refused:  # the SDK's client cannot initialize
            async with connected(server.url):
                pass
        assert refused.group_contains(MCPError, match="error response")

        async with connected(server.url, reader) as session:
            assert await tool_names(session) == []  # no sessions:write, no approvals scope
            denied = await session.call_tool("assistant", {"message": "hi"})
            assert denied.is_error
            assert text(denied) == "forbidden: 'rita' lacks the scope 'sessions:write' this needs"

        async with connected(server.url, acme) as session:
            waiting = structured(await session.call_tool("assistant", {"message": "email bob: hi"}))
            [gate] = waiting["waits"]
            mine = structured(await session.call_tool("list_approvals", {}))["approvals"]
            assert [item["approvalId"] for item in mine] == [gate["id"]]

        async with connected(server.url, globex) as session:
            assert structured(await session.call_tool("list_approvals", {}))["approvals"] == []
            theirs = await session.call_tool("approve", {"approvalId": gate["id"]})
            assert theirs.is_error
            assert text(theirs).startswith("approval_not_found: ")
            other = await session.call_tool(
                "assistant", {"message": "hi", "sessionId": waiting["sessionId"]}
            )
            assert other.is_error and text(other).startswith("conversation_not_found: ")

        async with connected(server.url, acme) as session:
            rejected = await session.call_tool(
                "reject", {"approvalId": gate["id"], "reason": "no emails today"}
            )
            assert structured(rejected)["status"] == "succeeded"
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            signed = {"Authorization": f"Bearer {acme}"}
            listed = await client.get("/approvals", params={"status": "decided"}, headers=signed)
            decided = listed.json()
        [item] = decided["approvals"]
        assert item["decision"]["decision"] == "reject"
        assert item["decision"]["approver"] == "ann"
        assert item["decidedBy"]["subject"] == "ann"
    finally:
        server.stop()


async def test_an_apps_agents_over_mcp(tmp_path: Path) -> None:
    """``serve --app --mcp``: the application's own agent, its gated tool rejected through
    ``reject``, and the run's answer after it."""
    data, log = tmp_path / "data", tmp_path / "serve.log"
    server = start_server(data, log, "--mcp", app="tests.cli.gate_app:v1")
    try:
        async with connected(server.url) as session:
            assert await tool_names(session) == ["assistant", "list_approvals", "approve", "reject"]
            asked = structured(await session.call_tool("assistant", {"message": "hi"}))
            [gate] = asked["waits"]
            assert (gate["tool"], gate["args"]) == ("send_email", {"to": "bob"})
            heard = Heard()
            rejected = await session.call_tool(
                "reject", {"approvalId": gate["id"]}, progress_callback=heard
            )
            assert structured(rejected) == {
                "status": "succeeded",
                "answer": "done",
                "sessionId": asked["sessionId"],
                "submissionId": asked["submissionId"],
            }
            assert any(
                message.startswith("the tool answered with an error") for message in heard.messages
            )
    finally:
        server.stop()
