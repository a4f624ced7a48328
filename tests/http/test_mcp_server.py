"""``create_app(mcp=True)`` in this process: what it refuses when it is made, and the
application's ``authorize`` hook asked over MCP as on the routes (a real uvicorn, ``serve``,
on the memory, SQLite and PostgreSQL stores). The rest of the MCP conversation runs against
a real ``tether serve --mcp`` process (``tests/cli/test_serve_mcp.py``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from tether._extras import install_hint
from tether.demo import demo_agents
from tether.engine import AgentDefinition, Runtime
from tether.http import create_app

from ..mcp_client import connected, structured, text
from .test_authorize import OwnerRules, _people

Serve = Callable[..., Any]


async def test_an_agent_named_as_an_approvals_tool_is_refused() -> None:
    agents = {"approve": AgentDefinition(demo_agents()["assistant"].initialize)}
    async with Runtime(agents, "memory://") as runtime:
        with pytest.raises(ValueError, match="the agent 'approve' has the name of an approvals"):
            create_app(runtime, mcp=True)
        create_app(runtime)  # without MCP the name is no one's


async def test_mcp_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tether.http._mcp_server", None)
    async with Runtime(demo_agents(), "memory://") as runtime:
        with pytest.raises(ImportError) as raised:
            create_app(runtime, mcp=True)
    assert str(raised.value).startswith(f"create_app(mcp=True) {install_hint('mcp')}: ")


async def test_the_authorize_hook_over_mcp(serve: Serve) -> None:
    """Only a session's owner writes to it (docs/auth.md's rule): another of its tenant
    may not continue it through the agent's tool, nor decide its approval."""
    rules = OwnerRules()
    server = await serve(demo_agents(), authenticate=_people, authorize=rules, mcp=True)
    async with connected(server.url, "ann") as session:
        asked = await session.call_tool("assistant", {"message": "email bob: hi"})
        waiting = structured(asked)
        [gate] = waiting["waits"]
    assert ("ann@acme", "sessions:write") in [(who, action) for who, action, _ in rules.asked]
    async with connected(server.url, "bob") as session:
        continued = await session.call_tool(
            "assistant", {"message": "hi", "sessionId": waiting["sessionId"]}
        )
        assert continued.is_error
        assert text(continued) == "forbidden: 'bob@acme' may not write this session"
        # Bob may decide (the rule guards writes only), as on POST /approvals/{id}.
        decided = await session.call_tool("reject", {"approvalId": gate["id"], "wait": False})
        assert structured(decided)["status"] == "decided"
    [(_, action, resource)] = [entry for entry in rules.asked if entry[0] == "bob@acme"][-1:]
    assert (action, resource.kind, resource.id) == ("approvals:decide", "approval", gate["id"])
