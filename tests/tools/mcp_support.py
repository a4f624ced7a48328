"""What the MCP tests share: the test server's command, a model that calls the tool a user
message names, the server's ledger of calls, and whether a process still runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
from pydantic import JsonValue

from tether.messages import ModelRequest
from tether.models import Rule, ScriptedModel, ToolUse

__all__ = ("SERVER", "alive", "calling_model", "ledger", "server_command")

SERVER = Path(__file__).with_name("mcp_server.py")


def server_command() -> list[str]:
    return [sys.executable, str(SERVER), "stdio"]


def _call(request: ModelRequest) -> ToolUse:
    """``tool:<name> <json args>`` in the last user message: call that tool."""
    text = request.messages[-1].text
    name, _, args = text.partition(" ")
    parsed = orjson.loads(args or "{}")
    assert isinstance(parsed, dict)
    return ToolUse(name.removeprefix("tool:"), parsed)


def _answer(request: ModelRequest) -> str:
    results = [m.parts[0] for m in request.messages if m.role == "tool"]
    return "answer: " + " | ".join(getattr(r, "content", "") for r in results)


def calling_model(*then: Rule) -> ScriptedModel:
    """A model that calls the tool named by ``tool:<name> <json>``; after a tool's result,
    the first of ``then`` that fits, else it answers with every result so far."""
    return ScriptedModel([Rule("tool:", _call), *then, Rule("", _answer, on="tool")])


def ledger(path: Path) -> list[dict[str, JsonValue]]:
    """The calls the test server received, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie does not: it is only waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")
