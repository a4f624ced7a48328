"""The MCP servers of an Agents SDK agent, journaled: the tools the SDK lists from them become
a recorded step, and each call an ordinary journaled tool call.

Every time the SDK asks the journaled clone for its MCP tools (once per turn of its loop),
the listing (each tool's name, description, parameters' schema and whether it needs
approval) is a step, ``openai_agents.mcp_tools:<agent>``: live, the SDK lists the servers;
on recovery and replay the step is served, and no server is asked. The tools offered are
built from that listing, each a ``FunctionTool`` journaled like any other (intent before,
outcome after; a crash mid-call re-runs an idempotent tool, else the outcome is
``unknown``); only a call that goes live asks the SDK for the server's tool, by name, and
runs it. The application connects its servers as the SDK asks (``async with server:``);
a replay needs none connected. Within one run the tools must stay those its first listing
recorded: a listing that differs (live, after a resume) is
:class:`~tether.errors.McpToolsChanged`, a divergence, whose ``server`` names the agent.
"""

from __future__ import annotations

from typing import Any, cast

from agents import Agent, FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext
from pydantic import JsonValue

from tether.errors import NotJournaled
from tether.integrations._bridge import current_turn, step
from tether.integrations._mcp_listing import check_unchanged
from tether.integrations.openai_agents._scope import Scope
from tether.integrations.openai_agents._tools import journaled_tool_of

__all__ = ("MCP_TOOLS_STEP", "journal_mcp_servers")

MCP_TOOLS_STEP = "openai_agents.mcp_tools:"
"""The prefix of the step a listing is recorded in: the agent's name follows."""


def journal_mcp_servers(clone: Agent[Any], scope: Scope) -> None:
    """Make ``clone`` (a journaled clone with ``mcp_servers``) list and call its MCP tools
    through the journal (see the module)."""
    live_tools = Agent.get_mcp_tools  # the SDK's own listing and conversion
    first: list[JsonValue] | None = None  # the run's first listing: every later one matches it

    async def get_mcp_tools(run_context: RunContextWrapper[Any]) -> list[Any]:
        nonlocal first

        async def listing() -> JsonValue:
            return [_described(t) for t in await live_tools(clone, run_context)]

        recorded = await step(MCP_TOOLS_STEP + clone.name, listing)
        assert isinstance(recorded, list)
        if first is None:
            first = recorded
        else:
            check_unchanged(clone.name, current_turn().execution_id, first, recorded)
        return [
            journaled_tool_of(
                _recorded_tool(clone, entry, live_tools),
                scope.control,
                idempotent=str(entry["name"]) in scope.idempotent,
            )
            for entry in recorded
            if isinstance(entry, dict)
        ]

    # An instance attribute: the SDK's run loop asks the agent, which finds this first.
    object.__setattr__(clone, "get_mcp_tools", get_mcp_tools)


def _described(tool: object) -> JsonValue:
    if not isinstance(tool, FunctionTool):
        raise NotJournaled(
            f"openai-agents: an MCP server gave a {type(tool).__name__}, not a function tool"
        )
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": cast(JsonValue, tool.params_json_schema),
        "strict": tool.strict_json_schema,
        # A callable policy cannot be recorded: such a tool always waits for a decision.
        "needsApproval": tool.needs_approval is not False,
    }


def _recorded_tool(clone: Agent[Any], entry: dict[str, JsonValue], live_tools: Any) -> FunctionTool:
    name = str(entry["name"])

    async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
        # Live only (a recorded outcome is served before this runs): the server's tool now.
        for tool in await live_tools(clone, ctx):
            if isinstance(tool, FunctionTool) and tool.name == name:
                return await tool.on_invoke_tool(ctx, arguments)
        raise NotJournaled(
            f"openai-agents: agent {clone.name!r}: the run recorded the MCP tool {name!r}, "
            "which none of its servers lists now"
        )

    parameters = entry.get("parameters")
    return FunctionTool(
        name=name,
        description=str(entry.get("description") or ""),
        params_json_schema=cast(dict[str, Any], parameters if isinstance(parameters, dict) else {}),
        on_invoke_tool=invoke,
        strict_json_schema=bool(entry.get("strict")),
        needs_approval=bool(entry.get("needsApproval")),
    )
