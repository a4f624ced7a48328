"""A pydantic-ai agent's own MCP toolsets (``pydantic_ai.mcp.MCPToolset``, on fastmcp) under
``durable()``: a real MCP server (written with the SDK: tests/tools/mcp_server.py) over stdio
and streamable HTTP on 127.0.0.1, and pydantic-ai's OpenAI model over HTTP to the fake OpenAI
API. Each listing is a step, each call a journaled tool call, a replay connects to no server,
a destructive tool waits for an approval, and a server whose tools changed is a divergence."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tether.engine import Runtime
from tether.errors import McpToolsChanged
from tether.integrations.pydantic_ai import McpPolicy, PydanticAIHarness, durable
from tether.journal import Decision, Journal
from tether.messages import ToolOutcomeStatus
from tether.records import StepRecorded, ToolOutcome
from tether.store import MemoryStore, Store
from tether.testing import copy_prefix

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ...processes import kill, start
from ...tools.mcp_support import SERVER, ledger
from ..approvals import decide_parked
from ..cuts import replay_sends_nothing, resume_over_http_from_every_cut

pytestmark = pytest.mark.process

Make = Callable[..., Runtime]


def stdio(calls: Path | None, *, extra: bool = False) -> MCPToolset[Any]:
    env = {"MCP_LEDGER": str(calls)} if calls is not None else {}
    if extra:
        env["MCP_EXTRA_TOOL"] = "1"
    return MCPToolset(StdioTransport(sys.executable, [str(SERVER), "stdio"], env=env))


def never_started() -> MCPToolset[Any]:
    """A server that cannot start: a replay that tried to connect would fail."""
    return MCPToolset(StdioTransport("/nonexistent/mcp-server", []))


def agent(fake: FakeOpenAI, toolset: MCPToolset[Any]) -> Agent[None, str]:
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=fake.url, api_key="fake"))
    return Agent(model, toolsets=[toolset])


async def ask(runtime: Runtime, text: str) -> tuple[str, Any]:
    receipt = await runtime.dispatch("calc", "me", text)
    return receipt.conversation_id, (await settle(runtime, receipt.submission_id))["result"]


def listings(records: list[Any]) -> list[Any]:
    return [
        r.payload.value
        for r in records
        if isinstance(r.payload, StepRecorded) and r.payload.name.startswith("pydantic_ai.mcp_")
    ]


async def test_stdio_mcp_tools_are_journaled_and_replayed_without_the_server(
    fake: FakeOpenAI, make_runtime: Make, store: Store, tmp_path: Path
) -> None:
    calls = tmp_path / "ledger.jsonl"
    fake.add(Answer(calls=(Call("add", {"a": 2, "b": 3}),)), Answer(text="it is 5"))
    async with make_runtime({"calc": durable(agent(fake, stdio(calls)))}) as runtime:
        conversation_id, result = await ask(runtime, "add 2 and 3")
        records = await runtime.records(conversation_id)
    assert result == "it is 5"
    assert [(c["tool"], c["args"]) for c in ledger(calls)] == [("add", {"a": 2, "b": 3})]
    kinds = [r.kind for r in records]
    assert kinds.count("tool_called") == kinds.count("tool_outcome") == 1
    listed = listings(records)
    assert len(listed) == 2  # one listing per step of pydantic-ai's loop
    assert all({"add", "note", "wipe"} <= {t["name"] for t in v} for v in listed)
    outcome = next(r.payload for r in records if isinstance(r.payload, ToolOutcome))
    assert outcome.content == "5"
    replayed = await replay_sends_nothing(
        store, fake, conversation_id, PydanticAIHarness(agent(fake, never_started()))
    )
    assert replayed == ["it is 5"]
    assert len(ledger(calls)) == 1
