"""A worker process killed with SIGKILL in the middle of a window's run, and started again,
fires that window once: the restarted scheduler admits the window's dispatch id again (a
no-op), and recovery finishes the run the first worker began.

This file is also the worker (a real process)::

    python test_schedules_crash.py DB_DIR HOLD_FILE

Its one schedule's window is the same for the whole test (the longest period a schedule may
have, 366 days, with a grace as long), so each worker that starts finds it due. Its model
answers only once HOLD_FILE is gone, so the kill lands mid-run.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tether.engine import MAX_PERIOD, AgentDefinition, AgentSpec, Runtime, Schedule
from tether.messages import ModelRequest, ModelResponse
from tether.models import DeltaSink, ScriptedModel
from tether.records import Signal, SubmissionSettled
from tether.store import SqliteStore, Store, Submission, SubmissionStatus

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the worker imports tests.*
from tests.journal.harnesses import EchoHarness
from tests.processes import eventually_awaited, kill, log_text, reap, start

pytestmark = pytest.mark.process

SCHEDULE = Schedule("echo", "acme", every=MAX_PERIOD, grace=MAX_PERIOD, body="tick", id="epoch")


class HeldModel(ScriptedModel):
    """Answers once the hold file is gone."""

    def __init__(self, hold: Path) -> None:
        super().__init__(lambda request: "done")
        self.hold = hold

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        while True:  # polled: the test removes a file, from another process
            if not self.hold.exists():
                return await super().request(request, stream)
            await asyncio.sleep(0.02)


async def worker(directory: Path, hold: Path) -> None:
    store = await SqliteStore.open(directory)
    spec = AgentSpec(harness=EchoHarness(), model=HeldModel(hold))
    agents = {"echo": AgentDefinition(lambda instance, env: spec)}
    settings: dict[str, Any] = {
        "claim_interval": 0.05,
        "lease": 1.0,
        "timeout_grace": 0.5,
        "schedule_poll": 0.2,
    }
    async with Runtime(agents, store, schedules=[SCHEDULE], **settings):
        await asyncio.Event().wait()  # until the test stops it


def _start(directory: Path, hold: Path, log: Path) -> subprocess.Popen[Any]:
    with log.open("ab") as out:
        return start([sys.executable, __file__, str(directory), str(hold)], stdout=out, stderr=out)


async def _windows(store: Store) -> list[Submission]:
    return [s for s in await store.list_submissions() if s.dispatch_id.startswith("schedule:")]


async def _running(store: Store) -> Submission | None:
    """The window's submission, once a worker has claimed it and asked the model."""
    windows = await _windows(store)
    if windows and windows[0].status is SubmissionStatus.RUNNING:
        records = await store.read(windows[0].conversation_id)
        if any(r.kind == "model_called" for r in records):
            return windows[0]
    return None


async def _settled(store: Store, submission_id: str) -> bool:
    return (await store.get_submission(submission_id)).status is SubmissionStatus.SETTLED


async def test_a_worker_killed_mid_window_and_restarted_fires_it_once(tmp_path: Path) -> None:
    directory, hold, log = tmp_path / "db", tmp_path / "hold", tmp_path / "worker.log"
    hold.touch()
    store = await SqliteStore.open(directory)  # the schema exists before any worker starts
    try:
        # Polled: the workers are other processes, writing the store.
        first = _start(directory, hold, log)
        running = await eventually_awaited(
            lambda: _running(store), lambda: f"the window never ran:\n{log_text(log)}"
        )
        kill(first)
        hold.unlink()
        second = _start(directory, hold, log)
        try:
            await eventually_awaited(
                lambda: _settled(store, running.id),
                lambda: f"the window never settled:\n{log_text(log)}",
            )
        finally:
            reap(second)
        [window] = await _windows(store)
        assert window.id == running.id
        # The window that was due: the latest start of a period, counted from the epoch.
        tag = window.dispatch_id.removeprefix("schedule:epoch:")
        start = datetime.fromisoformat(tag).timestamp()
        assert start % MAX_PERIOD == 0 and window.dispatch_id == running.dispatch_id
        assert window.settlement is not None and window.settlement["status"] == "succeeded"
        records = await store.read(window.conversation_id)
        assert [r.payload.tag for r in records if isinstance(r.payload, Signal)] == [tag]
        assert sum(isinstance(r.payload, SubmissionSettled) for r in records) == 1
        assert len(await store.list_attempts(window.id)) == 2  # killed, then recovered
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(worker(Path(sys.argv[1]), Path(sys.argv[2])))
