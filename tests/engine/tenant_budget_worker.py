"""A worker process for the tenant budget crash test: runs a tenant's looping agent under a
tenant budget until it is killed.

    python tenant_budget_worker.py DB_DIR LOG_FILE tool|call

Each model call appends ``model`` to LOG_FILE once answered. ``tool``: the tool of the
second step writes ``held`` and never returns, so the test kills the process with two calls
recorded (their usage in the tenant's aggregate) and the next call's budget decision not
made. ``call``: the third model call writes ``calling`` and never answers, so the test
kills the process with the call's reservation held (it expires with the worker's lease).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.engine.crash_worker import _append  # one line a write, whole across a kill
from tests.engine.test_tenant_budget import costly
from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, Runtime, TenantBudget
from tether.messages import ModelRequest, ModelResponse
from tether.models import DeltaSink, ScriptedModel
from tether.store import SqliteStore

BUDGET = {"acme": TenantBudget(model_calls=5)}


class Logged(ScriptedModel):
    def __init__(self, log: Path, mode: str) -> None:
        super().__init__(costly()._script)
        self.log, self.mode, self.count = log, mode, 0

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        self.count += 1
        if self.mode == "call" and self.count == 3:
            _append(self.log, "calling")
            await asyncio.Event().wait()  # until the test kills this process
        response = await super().request(request, stream)
        _append(self.log, "model")
        return response


async def main(directory: Path, log: Path, mode: str) -> None:
    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        if q == "2" and mode == "tool":
            _append(log, "held")
            await asyncio.Event().wait()  # until the test kills this process
        return f"found {q}"

    store = await SqliteStore.open(directory)
    spec = agent_spec(Logged(log, mode), tools=[lookup])
    agents = {"a": AgentDefinition(lambda instance, env: spec)}
    async with Runtime(agents, store, claim_interval=0.05, lease=1.0, tenant_budgets=BUDGET):
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]))
