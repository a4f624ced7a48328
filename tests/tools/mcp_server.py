"""A real MCP server, written with the official SDK, for the tests of ``tether.tools.mcp``.

Run as ``python mcp_server.py stdio`` or ``python mcp_server.py http|sse`` (streamable HTTP or
SSE on 127.0.0.1, an ephemeral port: it prints ``PORT <n>`` once it listens). Every tool
call the server receives is appended, as one JSON line, to the file ``MCP_LEDGER`` names:
the tests read what the server saw from it. ``MCP_EXTRA_TOOL=1`` adds a tool (a server that
changed its tools); ``hold`` waits until the file ``MCP_RELEASE`` names exists (a call that
is under way when a test kills the worker); ``crash`` ends the process mid-call.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

__all__ = ("server",)

server = MCPServer("tether-test")


def _saw(tool: str, **args: object) -> None:
    ledger = os.environ.get("MCP_LEDGER")
    if ledger:
        with open(ledger, "a") as file:
            file.write(json.dumps({"tool": tool, "args": args, "pid": os.getpid()}) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    _saw("add", a=a, b=b)
    return a + b


@server.tool()
def note(text: str) -> str:
    """Write a note (not idempotent: each call writes one)."""
    _saw("note", text=text)
    return f"noted: {text}"


@server.tool(annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False))
def wipe(what: str) -> str:
    """Delete something (destructive)."""
    _saw("wipe", what=what)
    return f"wiped {what}"


@server.tool()
def hold(text: str) -> str:
    """Record the call, then wait until released."""
    _saw("hold", text=text)
    release = Path(os.environ.get("MCP_RELEASE", "/nonexistent/release"))
    while not release.exists():
        time.sleep(0.05)  # waits for another process: the test makes the file
    return f"held: {text}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def count(n: int, ctx: Context) -> str:
    """Count to n, reporting progress at each step."""
    _saw("count", n=n)
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"counted {step}")
    return f"counted to {n}"


@server.tool()
def crash(text: str) -> str:
    """Record the call, then end the server's process before answering."""
    _saw("crash", text=text)
    os._exit(3)


if os.environ.get("MCP_EXTRA_TOOL") == "1":

    @server.tool()
    def extra(x: int) -> int:
        """A tool the server grew."""
        return x


def _serve_http(transport: str) -> None:
    import uvicorn

    app = server.sse_app() if transport == "sse" else server.streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run("stdio")
    else:
        _serve_http(mode)
