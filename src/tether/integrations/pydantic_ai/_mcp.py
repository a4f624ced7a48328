"""pydantic-ai's own MCP toolsets (``pydantic_ai.mcp.MCPToolset``, on the ``fastmcp``
client) in a durable run: the listing a run step saw is a recorded step, each call an
ordinary journaled tool call, and a replay connects to no server.

Every time pydantic-ai asks an MCP toolset for its tools (once per step of its loop), the
listing (each tool's name, description, parameters' schema, annotations and metadata) is a
step, ``pydantic_ai.mcp_tools:<server>``: live, the toolset lists the server; on recovery
and replay the step is served and no server is asked. The tools offered are built from
that listing. The journaled toolset around them (:class:`JournaledToolset`) records each
call, intent before and outcome after, so a crash mid-call re-runs a tool safe to run
again and leaves any other ``unknown``. The server is connected only when a run first
goes live on it (a listing or a call), and disconnected when the run ends; a run served
wholly from the journal never connects. Within one run its tools must stay those the run
recorded first: other tools are :class:`~tether.errors.McpToolsChanged`, a divergence.
Which tools wait for an approval, and which are safe to call again, is decided from the
server's annotations or by name (see :class:`McpPolicy`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import sys
from typing import Any, cast

from pydantic import JsonValue
from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from tether.integrations._bridge import current_turn, step
from tether.integrations._mcp_listing import (
    McpApproval,
    McpIdempotence,
    check_unchanged,
    needs_approval,
    safe_again,
)
from tether.integrations.pydantic_ai._convert import jsonable
from tether.integrations.pydantic_ai._model import UnsupportedConstruct

__all__ = ("IDEMPOTENT", "MCP_TOOLS_STEP", "JournaledMcpToolset", "McpPolicy", "journal_mcp")

MCP_TOOLS_STEP = "pydantic_ai.mcp_tools:"
"""The prefix of the step a listing is recorded in: the server's name follows (the
``id=`` the toolset was given, else ``mcp<n>``, its place among the agent's MCP toolsets)."""
IDEMPOTENT = "tether.idempotent"
"""The key of a tool definition's metadata that marks an MCP tool safe to call again."""


@dataclasses.dataclass(frozen=True)
class McpPolicy:
    """How a durable run treats its MCP servers' tools, as ``tether.tools.mcp`` does:
    ``approval`` which wait for a human (by default those annotated ``destructiveHint``),
    ``idempotent`` which recovery may call again (by default those annotated
    ``readOnlyHint`` or ``idempotentHint``; the run's ``idempotent_tools`` are too).
    Annotations are the server's claims: for a server you do not trust, name the tools.

    Example::

        files = MCPToolset("http://127.0.0.1:8000/mcp", id="files")
        durable(Agent("openai:gpt-4o", toolsets=[files]),
                mcp=McpPolicy(approval=["delete_file"], idempotent=["read_file"]))
    """

    approval: McpApproval = "destructive"
    idempotent: McpIdempotence = "hints"


def journal_mcp(toolset: AbstractToolset[Any], policy: McpPolicy) -> AbstractToolset[Any]:
    """``toolset`` with each of its MCP toolsets journaled (see the module)."""
    # Only a program that made an MCPToolset has imported pydantic_ai.mcp (which needs
    # fastmcp): without it there is none to find, and nothing is imported here.
    found = getattr(sys.modules.get("pydantic_ai.mcp"), "MCPToolset", None)
    if found is None:
        return toolset
    numbers = itertools.count()

    def journaled(leaf: AbstractToolset[Any]) -> AbstractToolset[Any]:
        if not isinstance(leaf, found):
            return leaf
        if getattr(leaf, "include_instructions", False):
            raise UnsupportedConstruct(
                f"{leaf.label}: include_instructions=True adds what the server says at each "
                "connection to the model's instructions, which a replay (connected to no "
                "server) cannot know; pass the instructions to the agent instead"
            )
        # Only an id the application chose names the step: pydantic-ai derives one from a
        # URL's host otherwise, and a server that moved must not make a resume diverge.
        chosen = getattr(leaf, "_explicit_id", None)
        server = chosen if isinstance(chosen, str) else f"mcp{next(numbers)}"
        return JournaledMcpToolset(leaf, server=server, policy=policy)

    return toolset.visit_and_replace(journaled)


@dataclasses.dataclass
class JournaledMcpToolset(WrapperToolset[Any]):
    """An ``MCPToolset`` whose listings are recorded steps, connected only when a run goes
    live on it (see the module)."""

    server: str = "mcp"
    policy: McpPolicy = McpPolicy()
    _connected: bool = dataclasses.field(default=False, init=False)
    _first: list[JsonValue] | None = dataclasses.field(default=None, init=False)
    _lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock, init=False)

    async def __aenter__(self) -> JournaledMcpToolset:
        return self  # a replay must not start or reach the server: connected when needed

    async def __aexit__(self, *args: Any) -> bool | None:
        if not self._connected:
            return None
        self._connected = False
        return await self.wrapped.__aexit__(*args)

    async def _live(self) -> None:
        async with self._lock:
            if not self._connected:
                await self.wrapped.__aenter__()
                self._connected = True

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        async def listing() -> JsonValue:
            await self._live()
            tools = await self.wrapped.get_tools(ctx)
            return [_described(tool.tool_def) for tool in tools.values()]

        recorded = await step(MCP_TOOLS_STEP + self.server, listing)
        assert isinstance(recorded, list)
        if self._first is None:
            self._first = recorded
        else:
            check_unchanged(self.server, current_turn().execution_id, self._first, recorded)
        tools = [self._tool(entry, ctx) for entry in recorded if isinstance(entry, dict)]
        return {tool.tool_def.name: tool for tool in tools}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        # Live only: the journaled toolset around this one serves a recorded outcome first.
        await self._live()
        return await self.wrapped.call_tool(name, tool_args, ctx, tool)

    def _tool(self, entry: dict[str, JsonValue], ctx: RunContext[Any]) -> ToolsetTool[Any]:
        name = str(entry["name"])
        metadata = entry.get("metadata")
        metadata = dict(metadata) if isinstance(metadata, dict) else {}
        annotations = metadata.get("annotations")
        if safe_again(self.policy.idempotent, name, annotations):
            metadata[IDEMPOTENT] = True
        parameters = entry.get("parameters")
        returns = entry.get("returnSchema")
        definition = ToolDefinition(
            name=name,
            description=cast(str | None, entry.get("description")),
            parameters_json_schema=parameters if isinstance(parameters, dict) else {},
            metadata=metadata,
            return_schema=returns if isinstance(returns, dict) else None,
            include_return_schema=getattr(self.wrapped, "include_return_schema", None),
            # The journaled toolset makes an "unapproved" tool's call a Tether approval.
            kind="unapproved"
            if needs_approval(self.policy.approval, name, annotations)
            else "function",
        )
        mcp_toolset: Any = self.wrapped  # an MCPToolset (journal_mcp wraps nothing else)
        tool: ToolsetTool[Any] = mcp_toolset.tool_for_tool_def(definition, ctx=ctx)
        return tool


def _described(definition: ToolDefinition) -> JsonValue:
    return {
        "name": definition.name,
        "description": definition.description,
        "parameters": jsonable(definition.parameters_json_schema),
        "metadata": jsonable(definition.metadata),
        "returnSchema": jsonable(definition.return_schema),
    }
