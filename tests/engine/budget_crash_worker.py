"""A worker process for the budget crash test: runs the looping agent until it is killed.

    python budget_crash_worker.py DB_DIR LOG_FILE [park]

Each model call and each tool run appends a line to LOG_FILE (``model``, ``tool <q>``); the
tool of the second step writes ``held`` and never returns, so the test kills the process
with a tool call recorded and unanswered, two model calls paid for. With ``park`` no tool
holds: the run goes on until its budget runs out, and the process SIGKILLs itself when it
parks on the budget gate, its request written and the park not made (``parking``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.engine.crash_worker import _append  # one line a write, whole across a kill
from tests.engine.test_budget import looping
from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.messages import ModelRequest, ModelResponse
from tether.models import DeltaSink, ScriptedModel
from tether.store import SqliteStore


class Logged(ScriptedModel):
    def __init__(self, log: Path) -> None:
        super().__init__(looping()._script)
        self.log = log

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        _append(self.log, "model")
        return await super().request(request, stream)


async def main(directory: Path, log: Path, mode: str) -> None:
    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        _append(log, f"tool {q}")
        if q == "2-0" and mode != "park":
            _append(log, "held")
            await asyncio.Event().wait()  # until the test kills this process
        return f"found {q}"

    store = await SqliteStore.open(directory)
    if mode == "park":

        async def park(*args: Any, **kwargs: Any) -> Any:
            _append(log, "parking")
            os.kill(os.getpid(), signal.SIGKILL)  # between the gate's request and the park

        store.park = park  # type: ignore[method-assign]
    spec = agent_spec(Logged(log), tools=[lookup])
    agents = {"a": AgentDefinition(lambda instance, env: spec)}
    async with Runtime(agents, store, claim_interval=0.05, lease=1.0):
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), "".join(sys.argv[3:])))
