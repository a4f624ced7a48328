"""A worker process for the pydantic-ai MCP kill test: runs a durable pydantic-ai agent whose
own MCP toolset (a stdio server, tests/tools/mcp_server.py) holds its ``hold`` call until
released, until the test SIGKILLs it mid-call. Its model is pydantic-ai's OpenAI client on
the test's fake OpenAI API.

    python mcp_worker.py DB_DIR BASE_URL LEDGER RELEASE [idempotent]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.engine.conftest import FAST
from tests.tools.mcp_support import SERVER
from tether.engine import AgentDefinition, Runtime
from tether.integrations.pydantic_ai import durable
from tether.store import SqliteStore

__all__ = ("agents",)


def agents(
    base_url: str, ledger: Path, release: Path, *, idempotent: bool
) -> dict[str, AgentDefinition]:
    env = {"MCP_LEDGER": str(ledger), "MCP_RELEASE": str(release)}
    toolset = MCPToolset(StdioTransport(sys.executable, [str(SERVER), "stdio"], env=env))
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=base_url, api_key="fake"))
    agent = Agent(model, toolsets=[toolset])
    return {"calc": durable(agent, idempotent_tools=["hold"] if idempotent else ())}


async def main(
    directory: Path, base_url: str, ledger: Path, release: Path, idempotent: bool
) -> None:
    store = await SqliteStore.open(directory)
    async with Runtime(agents(base_url, ledger, release, idempotent=idempotent), store, **FAST):
        await asyncio.Event().wait()  # runs until killed


if __name__ == "__main__":
    directory, base_url, ledger, release = sys.argv[1:5]
    asyncio.run(
        main(Path(directory), base_url, Path(ledger), Path(release), sys.argv[5:] == ["idempotent"])
    )
