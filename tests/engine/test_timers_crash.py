"""Timers across kill -9 and restarts, with real processes: a run asleep, its worker
SIGKILLed, is woken once by a worker started after its time; a delayed dispatch admitted by
a worker killed before its time runs once on the next worker. Nothing holds a timer in the
meantime: no process is alive while it is due.

This file is also the worker (a real process)::

    python test_timers_crash.py STORE_URL EFFECTS_FILE MODE

``MODE`` is ``sleep`` (it dispatches, idempotently, a run that sleeps ``NAP`` seconds) or
``delay`` (it dispatches, idempotently, a run delayed by ``NAP`` seconds). Each live wake of
the harness appends a line to EFFECTS_FILE, for the test to count.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.journal import Turn
from tether.records import StepRecorded, SubmissionSettled
from tether.store import WAIT_FOR_TIMER, Store, Submission, SubmissionStatus, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the worker imports tests.*
from tests.postgres import fresh_schema, store_url
from tests.processes import eventually_awaited, kill, log_text, reap, start

pytestmark = [
    pytest.mark.process,
    pytest.mark.parametrize(
        "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
    ),
]

NAP = 1.5
"""Seconds a run sleeps (or a dispatch is delayed): long enough to kill its worker first."""


def _append(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class Napper:
    """Sleeps (in ``sleep`` mode), then notes each live wake in the effects file."""

    name, version = "napper", "1"

    def __init__(self, effects: Path, sleeps: bool) -> None:
        self.effects, self.sleeps = effects, sleeps

    async def run(self, turn: Turn) -> JsonValue:
        if self.sleeps:
            await turn.sleep(NAP)
        _append(self.effects, f"woke {turn.execution_id}")
        return "rested"


async def worker(url: str, effects: Path, mode: str) -> None:
    store = await open_store(url)
    spec = AgentSpec(harness=Napper(effects, sleeps=mode == "sleep"))
    agents = {"nap": AgentDefinition(lambda instance, env: spec)}
    settings: dict[str, Any] = {"claim_interval": 0.05, "lease": 1.0, "timeout_grace": 0.5}
    async with Runtime(agents, store, **settings) as runtime:
        await runtime.dispatch(
            "nap", "acme", "rest", dispatch_id="once", after=NAP if mode == "delay" else None
        )
        await asyncio.Event().wait()  # until the test stops it


def _start(url: str, effects: Path, mode: str, log: Path) -> subprocess.Popen[Any]:
    with log.open("ab") as out:
        return start([sys.executable, __file__, url, str(effects), mode], stdout=out, stderr=out)


def _url(directory: Path, backend: str) -> str:
    if backend == "sqlite":
        directory.mkdir()
        return f"sqlite:///{directory}"
    return store_url(fresh_schema())


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def _only(store: Store, status: SubmissionStatus) -> Submission | None:
    found = await store.list_submissions()
    return found[0] if found and found[0].status is status else None


async def _past(due: datetime) -> None:
    """Until ``due`` has passed: what the test is about is time itself passing."""
    await asyncio.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds()) + 0.2)


async def _settled_once(store: Store, submission: Submission, effects: Path, log: Path) -> None:
    async def settled() -> bool:
        return (await store.get_submission(submission.id)).status is SubmissionStatus.SETTLED

    await eventually_awaited(settled, lambda: f"it never settled:\n{log_text(log)}")
    final = await store.get_submission(submission.id)
    assert final.settlement is not None and final.settlement["status"] == "succeeded"
    records = await store.read(submission.conversation_id)
    assert sum(isinstance(r.payload, SubmissionSettled) for r in records) == 1
    assert len(_lines(effects)) == 1  # woken once, live


async def test_a_sleeping_run_whose_worker_was_killed_wakes_once_on_a_later_worker(
    tmp_path: Path, backend: str
) -> None:
    url, effects, log = _url(tmp_path / "db", backend), tmp_path / "effects", tmp_path / "log"
    store = await open_store(url)  # the schema exists before any worker starts
    try:
        first = _start(url, effects, "sleep", log)
        try:
            asleep = await eventually_awaited(
                lambda: _only(store, SubmissionStatus.WAITING),
                lambda: f"it never slept:\n{log_text(log)}",
            )
        finally:
            kill(first)
        assert asleep.wait_reason == WAIT_FOR_TIMER and asleep.wait_until is not None
        assert asleep.lease_expires_at is None  # nobody holds it
        await _past(asleep.wait_until)
        assert _lines(effects) == []  # no process was alive to wake it
        second = _start(url, effects, "sleep", log)
        try:
            await _settled_once(store, asleep, effects, log)
        finally:
            reap(second)
        records = await store.read(asleep.conversation_id)
        steps = [r.payload.name for r in records if isinstance(r.payload, StepRecorded)]
        assert steps == ["tether.sleep", "tether.woke"]
        assert len(await store.list_submissions()) == 1  # the second dispatch was a replay
    finally:
        await store.close()


async def test_a_delayed_dispatch_outlives_its_worker_and_runs_once_on_the_next(
    tmp_path: Path, backend: str
) -> None:
    url, effects, log = _url(tmp_path / "db", backend), tmp_path / "effects", tmp_path / "log"
    store = await open_store(url)
    try:
        first = _start(url, effects, "delay", log)
        try:
            scheduled = await eventually_awaited(
                lambda: _only(store, SubmissionStatus.SCHEDULED),
                lambda: f"it was never admitted:\n{log_text(log)}",
            )
        finally:
            kill(first)
        assert scheduled.wait_until is not None
        assert scheduled.wait_until > scheduled.created_at
        await _past(scheduled.wait_until)
        assert (await store.get_submission(scheduled.id)).status is SubmissionStatus.SCHEDULED
        second = _start(url, effects, "delay", log)
        try:
            await _settled_once(store, scheduled, effects, log)
        finally:
            reap(second)
        assert len(await store.list_submissions()) == 1
        assert len(await store.list_attempts(scheduled.id)) == 1  # it never ran before
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(worker(sys.argv[1], Path(sys.argv[2]), sys.argv[3]))
