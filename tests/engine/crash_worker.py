"""A worker process for the crash tests: runs a tool-using agent until it is killed.

    python crash_worker.py DB_DIR EFFECTS_FILE [--settle-and-exit]

Its model and tools are slow, so SIGKILL lands mid-turn, and they audit themselves:
the model writes VIOLATION if it is asked for a completion the log already holds, and
every tool run appends its idempotency key to EFFECTS_FILE (``lookup`` deduplicates by
key, as an idempotent API would; ``charge`` does not).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from pathlib import Path

from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.journal import ToolScope
from tether.messages import ModelRequest, ModelResponse, ToolCall
from tether.models import DeltaSink, ScriptedModel
from tether.store import SqliteStore, SubmissionStatus
from tether.testing import RecordingTools

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.journal.harnesses import LoopHarness, planner


class AuditedModel(ScriptedModel):
    def __init__(self, db: Path, effects: Path) -> None:
        super().__init__(planner, chunk=7)
        self.db, self.effects = db, effects

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        input_hash = request.input_hash()
        with sqlite3.connect(self.db) as conn:
            calls = [
                row[0]
                for row in conn.execute(
                    "SELECT json_extract(body, '$.payload.callId') FROM records "
                    "WHERE json_extract(body, '$.kind') = 'model_called' "
                    "AND json_extract(body, '$.payload.inputHash') = ?",
                    (input_hash,),
                )
            ]
            answered = (
                conn.execute(
                    "SELECT COUNT(*) FROM records "
                    "WHERE json_extract(body, '$.kind') = 'assistant_message_completed' "
                    "AND json_extract(body, '$.payload.interrupted') IS NULL "
                    f"AND json_extract(body, '$.payload.callId') IN ({','.join('?' * len(calls))})",
                    calls,
                ).fetchone()[0]
                if calls
                else 0
            )
        conn.close()
        if answered:
            _append(self.effects, f"VIOLATION model {input_hash}")
        await asyncio.sleep(0.03)  # a model's latency: room for a kill mid-call
        return await super().request(request, stream)


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _seen(path: Path, line: str) -> bool:
    return path.exists() and line in path.read_text().splitlines()


def tools(effects: Path) -> RecordingTools:
    async def lookup(call: ToolCall, scope: ToolScope) -> JsonValue:
        key = scope.idempotency_key
        if not _seen(effects, f"lookup {key}"):
            await asyncio.sleep(0.02)  # a tool's work: room for a kill mid-call
            _append(effects, f"lookup {key}")
        return "sunny"

    async def charge(call: ToolCall, scope: ToolScope) -> JsonValue:
        await asyncio.sleep(0.02)  # a tool's work: room for a kill mid-call
        _append(effects, f"charge {scope.idempotency_key}")
        return "charged"

    return RecordingTools({"lookup": lookup, "charge": charge})


async def main(directory: Path, effects: Path, settle_and_exit: bool) -> None:
    store = await SqliteStore.open(directory)
    model = AuditedModel(store.path, effects)
    spec = AgentSpec(harness=LoopHarness(), model=model, tools=tools(effects))
    agents = {"shop": AgentDefinition(lambda instance, env: spec, max_attempts=100)}
    async with Runtime(agents, store, claim_interval=0.05, lease=1.0, timeout_grace=0.5):
        while True:  # the runtime works; the test kills this process, or it settles all
            await asyncio.sleep(0.2)
            if settle_and_exit and not [
                s
                for s in await store.list_submissions()
                if s.status is not SubmissionStatus.SETTLED
            ]:
                break
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), "--settle-and-exit" in sys.argv))
