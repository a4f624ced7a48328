"""A worker process for the limits tests: runs agent ``a`` (at most one run in flight across
every worker, ``Limits(concurrency=1)``) until it is stopped or killed.

    python limits_worker.py STORE_URL LOG_FILE NAME [--hold]

Each model call appends ``start NAME <session>`` to LOG_FILE, waits a moment, and appends
``end NAME <session>`` before it answers; with ``--hold`` the first call never answers, so
the test can SIGKILL the worker with its slot taken.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.engine.crash_worker import _append  # one line a write, whole across a kill
from tests.journal.harnesses import EchoHarness
from tether.engine import AgentDefinition, AgentSpec, Limits, Runtime
from tether.messages import Message, ModelRequest, ModelResponse, TextPart
from tether.models import DeltaSink
from tether.store import open_store

LIMITS = Limits(concurrency=1)
LEASE = 1.0


class Logged:
    def __init__(self, log: Path, name: str, *, hold: bool) -> None:
        self.log, self.name, self.hold = log, name, hold

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        body = request.messages[-1].text
        _append(self.log, f"start {self.name} {body}")
        if self.hold:
            await asyncio.Event().wait()  # until the test kills this process
        await asyncio.sleep(0.05)  # a model's latency: a second run would overlap it
        _append(self.log, f"end {self.name} {body}")
        return ModelResponse(message=Message(role="assistant", parts=(TextPart(text="ok"),)))


def definition(model: Logged) -> AgentDefinition:
    spec = AgentSpec(harness=EchoHarness(), model=model)
    return AgentDefinition(lambda instance, env: spec, limits=LIMITS)


async def main(url: str, log: Path, name: str, hold: bool) -> None:
    store = await open_store(url)
    agents = {"a": definition(Logged(log, name, hold=hold))}
    async with Runtime(agents, store, claim_interval=0.05, lease=LEASE):
        _append(log, f"ready {name}")
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3], "--hold" in sys.argv[4:]))
