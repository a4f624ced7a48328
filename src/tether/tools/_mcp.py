"""``mcp(command=[...])`` / ``mcp(url=...)``: an MCP server's tools as a toolset of the built-in
agent, with the official ``mcp`` SDK (the ``mcp`` extra, imported only when a run connects).

Each execution records the server's listing (a step, ``tether.toolset:<name>``): the tools
it offers the model are that listing's, on replay too, which connects to nothing. Every call
is an ordinary journaled tool call (intent before, outcome after), so recovery treats an
MCP call like any tool: re-run if the tool is idempotent, else closed as ``unknown``. What
is idempotent and what needs a human's approval is decided per tool from the server's
annotations (hints) or by name; see :func:`mcp`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, JsonValue

from tether._extras import install_hint
from tether.agent import Tool, ToolArgumentsError, ToolContext, Toolset
from tether.messages import Mediation, ToolOutcomeStatus, ToolResult, ToolSpec
from tether.tools._mcp_connection import Interrupted, McpConnection, Transport
from tether.tools._mcp_launch import launched

__all__ = ("mcp",)

Approval = bool | Collection[str] | Literal["destructive"]
Idempotence = bool | Collection[str] | Literal["hints"]

INTERRUPTED = (
    "The MCP server stopped during this call (or did not answer in time), so its outcome is "
    "unknown: it may or may not have taken effect. The tool is not declared idempotent, so "
    "it was not called again. "
)


def mcp(
    command: Sequence[str] | None = None,
    *,
    url: str | None = None,
    transport: Literal["streamable-http", "sse"] | None = None,
    name: str = "mcp",
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    headers: Mapping[str, str] | None = None,
    tools: Collection[str] | None = None,
    prefix: str = "",
    approval: Approval = "destructive",
    idempotent: Idempotence = "hints",
    timeout: float | None = 300.0,
    start_timeout: float = 60.0,
) -> Toolset:
    """The tools of an MCP server, for the built-in :class:`~tether.agent.Agent` (pass it
    in ``tools`` beside :class:`~tether.agent.Tool` s).

    ``command`` starts a stdio server (``env`` adds to the SDK's scrubbed environment, which
    holds none of the worker's secrets; ``cwd`` is its directory); ``url`` reaches a running
    one over streamable HTTP, or SSE (``transport="sse"``, the default for a URL ending in
    ``/sse``), sending ``headers``. Each run gets its own connection, opened when first
    needed; a stdio server is started for the run, started again if its process dies (the
    call under way when it died is interrupted, see below), and stopped when the run ends,
    however it ends.

    ``tools`` keeps only the tools so named; ``prefix`` is put before each tool's name (to
    tell two servers' tools apart); ``name`` names the server in the journal, and must be
    unique among an agent's toolsets.

    ``approval`` gates calls on a human (``Mediation.APPROVAL``): ``"destructive"`` (the
    default) the tools the server annotates ``destructiveHint: true`` (and not
    ``readOnlyHint``), ``True`` every tool, a collection of names those tools, ``False``
    none. ``idempotent`` says which tools recovery may call again: ``"hints"`` (the default)
    those annotated ``readOnlyHint`` or ``idempotentHint``, or ``True``, ``False``, or
    names. Annotations are the server's claims: for a server you do not trust, name the
    tools (or pass ``approval=True``, ``idempotent=False``).

    A call the server did not answer (its process died, its socket closed, or ``timeout``
    seconds passed) of a tool not idempotent ends ``unknown``, as after a crash; an
    idempotent one is made again on a fresh connection, once. A server whose tools differ
    from those the run recorded, found when a run connects again (a resume, a restart),
    fails the run with :class:`~tether.errors.McpToolsChanged`, a divergence. A server that
    does not start and list its tools within ``start_timeout`` seconds (or cannot be reached)
    raises :class:`~tether.errors.McpServerUnavailable`: the run is tried again later when it
    happens as the run lists the tools, the model reads it as the call's error after that.

    Example::

        from tether.agent import agent_spec
        from tether.tools import mcp, workspace

        files = mcp(command=["npx", "-y", "@modelcontextprotocol/server-filesystem", "."],
                    name="files", idempotent=["read_file", "list_directory"])
        agent_spec(model, tools=[*workspace("."), files])
    """
    if (command is None) == (url is None):
        raise ValueError("give exactly one of command (a stdio server) or url")
    if command is not None and (isinstance(command, str) or not command):
        raise ValueError("command is a non-empty list of the program and its arguments")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be positive, not {timeout!r}")
    if start_timeout <= 0:
        raise ValueError(f"start_timeout must be positive, not {start_timeout!r}")
    if not name:
        raise ValueError("name must not be empty")
    if isinstance(approval, str) and approval != "destructive":
        raise ValueError(f"approval is a bool, tool names or 'destructive', not {approval!r}")
    if isinstance(idempotent, str) and idempotent != "hints":
        raise ValueError(f"idempotent is a bool, tool names or 'hints', not {idempotent!r}")
    if command is not None:
        argv = [str(word) for word in command]
        opener = functools.partial(_stdio, argv, dict(env or {}), cwd)
        target: JsonValue = {"command": list[JsonValue](argv)}
    else:
        assert url is not None
        kind = transport or ("sse" if url.rstrip("/").endswith("/sse") else "streamable-http")
        opener = functools.partial(_http, url, kind, dict(headers or {}))
        target = {"url": url, "transport": kind}
    return _McpServer(
        name=name,
        transport=opener,
        target=target,
        only=None if tools is None else frozenset(tools),
        prefix=prefix,
        approval=approval,
        idempotent=idempotent,
        timeout=timeout,
        start_timeout=start_timeout,
    )


def _sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ImportError(f"tether.tools.mcp {install_hint('mcp')}") from None


def _stdio(argv: list[str], env: dict[str, str], cwd: str | os.PathLike[str] | None) -> Any:
    _sdk()
    from mcp import StdioServerParameters, stdio_client

    command = launched(argv)  # a server that dies with this process, whatever kills it
    return stdio_client(
        StdioServerParameters(command=command[0], args=command[1:], env=env or None, cwd=cwd)
    )


def _http(url: str, kind: str, headers: dict[str, str]) -> Any:
    _sdk()
    if kind == "sse":
        from mcp.client.sse import sse_client

        return sse_client(url, headers=headers or None)
    return _streamable_http(url, headers)


@asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The SDK's own timeouts: a response stream may stay open for minutes. The client is
    # ours to close (the transport leaves a client it was given open).
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
        streamable_http_client(url, http_client=client) as streams,
    ):
        yield streams


class _Arguments(BaseModel):
    """Unused: an MCP tool's arguments are checked against the server's JSON Schema."""


@dataclass(frozen=True)
class _McpTool(Tool):
    """A tool of an MCP server: the server's JSON Schema is its parameters as given."""

    schema: dict[str, JsonValue] = field(default_factory=dict)

    @functools.cached_property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.schema,
            mediation=Mediation.APPROVAL if self.requires_approval else Mediation.HOST,
            idempotent=self.idempotent,
        )

    def parse(self, args: dict[str, JsonValue]) -> dict[str, Any]:
        import jsonschema

        try:
            jsonschema.validate(args, self.schema)
        except jsonschema.ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path) or "arguments"
            raise ToolArgumentsError(
                f"invalid arguments for {self.name}: {where}: {exc.message}"
            ) from None
        except jsonschema.SchemaError:
            pass  # the server's schema is its own to enforce
        return {"arguments": args}


class _McpServer(Toolset):
    """The toolset :func:`mcp` returns: per execution, a supervised connection."""

    def __init__(
        self,
        *,
        name: str,
        transport: Transport,
        target: JsonValue,
        only: frozenset[str] | None,
        prefix: str,
        approval: Approval,
        idempotent: Idempotence,
        timeout: float | None,
        start_timeout: float,
    ) -> None:
        self.name = name
        self._transport = transport
        self._target = target
        self._only = only
        self._prefix = prefix
        self._approval = approval
        self._idempotent = idempotent
        self._timeout = timeout
        self._start_timeout = start_timeout
        self._connections: dict[str, McpConnection] = {}

    def __repr__(self) -> str:
        return f"mcp({self.name!r}: {orjson.dumps(self._target).decode()})"

    def pins(self) -> JsonValue:
        return {"name": self.name, "server": self._target, "prefix": self._prefix}

    def connection(self, execution_id: str) -> McpConnection:
        """The execution's connection (made, not yet opened, on first use)."""
        found = self._connections.get(execution_id)
        if found is None:
            found = self._connections[execution_id] = McpConnection(
                self.name,
                self._transport,
                execution_id=execution_id,
                select=self._select,
                timeout=self._timeout,
                start_timeout=self._start_timeout,
            )
        return found

    def _select(self, listing: list[JsonValue]) -> list[JsonValue]:
        if self._only is None:
            return listing
        return [e for e in listing if isinstance(e, dict) and e.get("name") in self._only]

    async def list_tools(self, execution_id: str) -> JsonValue:
        listing: JsonValue = await self.connection(execution_id).listing()
        return listing

    def tools(self, listing: JsonValue, execution_id: str) -> Sequence[Tool]:
        if not isinstance(listing, list):
            raise ValueError(f"the recorded listing of {self.name!r} is not a list")
        # From now on, every opening of the server must offer what the run recorded.
        self.connection(execution_id).expected = listing
        return [self._tool(entry) for entry in listing if isinstance(entry, dict)]

    async def release(self, execution_id: str) -> None:
        connection = self._connections.pop(execution_id, None)
        if connection is not None:
            await connection.close()

    def _tool(self, entry: dict[str, JsonValue]) -> Tool:
        remote = str(entry["name"])
        hints = entry.get("annotations")
        hints = hints if isinstance(hints, dict) else {}
        read_only = hints.get("readOnlyHint") is True
        schema = entry.get("inputSchema")
        idempotent = _decide(
            self._idempotent, remote, "hints", read_only or hints.get("idempotentHint") is True
        )
        approval = _decide(
            self._approval,
            remote,
            "destructive",
            hints.get("destructiveHint") is True and not read_only,
        )

        async def call(arguments: dict[str, JsonValue], ctx: ToolContext) -> ToolResult:
            return await self._call(remote, arguments, ctx, idempotent=idempotent)

        return _McpTool(
            name=self._prefix + remote,
            description=str(entry.get("description") or ""),
            fn=call,
            arguments=_Arguments,
            context_parameter="ctx",
            requires_approval=approval,
            idempotent=idempotent,
            schema=schema if isinstance(schema, dict) else {"type": "object"},
        )

    async def _call(
        self,
        remote: str,
        arguments: dict[str, JsonValue],
        ctx: ToolContext,
        *,
        idempotent: bool,
    ) -> ToolResult:
        connection = self.connection(ctx.execution_id)
        try:
            result = await connection.call(remote, arguments, ctx.progress)
        except Interrupted as interrupted:
            if not idempotent:
                return ToolResult(
                    call_id=ctx.call_id,
                    content=INTERRUPTED + f"({interrupted})",
                    is_error=True,
                    status=ToolOutcomeStatus.UNKNOWN,
                )
            result = await connection.call(remote, arguments, ctx.progress)  # safe again, once
        return _result(ctx.call_id, result)


def _decide(policy: object, tool: str, by_hints: str, hinted: bool) -> bool:
    if policy == by_hints:
        return hinted
    if isinstance(policy, bool):
        return policy
    assert isinstance(policy, Collection)
    return tool in policy


def _result(call_id: str, result: Any) -> ToolResult:
    """An MCP ``CallToolResult`` as the journal's: its text blocks as the content (any
    other block as its JSON), its structured content as the data."""
    texts = []
    for block in result.content:
        text = getattr(block, "text", None)
        if getattr(block, "type", None) == "text" and isinstance(text, str):
            texts.append(text)
        else:
            shown = block.model_dump(mode="json", by_alias=True, exclude_none=True)
            texts.append(orjson.dumps(shown).decode())
    data: JsonValue = result.structured_content
    content = "\n".join(texts)
    if not texts and data is not None:
        content = orjson.dumps(data).decode()
    return ToolResult(
        call_id=call_id,
        content=content,
        data=data,
        is_error=bool(result.is_error),
        status=ToolOutcomeStatus.ERROR if result.is_error else ToolOutcomeStatus.OK,
    )
