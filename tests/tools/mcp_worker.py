"""A worker process for the MCP kill test: runs the agent whose MCP server (stdio) holds its
``hold`` call until released, until the test SIGKILLs it mid-call.

    python mcp_worker.py DB_DIR LEDGER RELEASE [idempotent]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.engine.conftest import FAST
from tests.tools.mcp_support import calling_model, server_command
from tether.engine import AgentDefinition, Runtime
from tether.store import SqliteStore
from tether.tools import mcp

__all__ = ("agents",)


def agents(ledger: Path, release: Path, *, idempotent: bool) -> dict[str, AgentDefinition]:
    from tether.agent import agent_spec

    toolset = mcp(
        command=server_command(),
        name="calc",
        env={"MCP_LEDGER": str(ledger), "MCP_RELEASE": str(release)},
        idempotent=["hold"] if idempotent else False,
    )
    spec = agent_spec(calling_model(), tools=[toolset])
    return {"bot": AgentDefinition(lambda instance, env: spec)}


async def main(directory: Path, ledger: Path, release: Path, idempotent: bool) -> None:
    store = await SqliteStore.open(directory)
    async with Runtime(agents(ledger, release, idempotent=idempotent), store, **FAST):
        await asyncio.Event().wait()  # runs until killed


if __name__ == "__main__":
    directory, ledger, release = (Path(a) for a in sys.argv[1:4])
    asyncio.run(main(directory, ledger, release, sys.argv[4:] == ["idempotent"]))
