"""Limits across real worker processes (issue 41, items 2 and 6): an agent's one run in
flight holds over two workers on one SQLite file and on PostgreSQL, and the slot of a worker
killed with SIGKILL comes back to the others."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.engine import Runtime
from tether.store import Store, SubmissionStatus, open_store

from ..postgres import fresh_schema, store_url
from ..processes import eventually_awaited, kill, reap, start
from .limits_worker import Logged, definition

pytestmark = pytest.mark.process

WORKER = Path(__file__).with_name("limits_worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}"
    return store_url(fresh_schema())


@pytest.fixture
async def shared(url: str) -> AsyncIterator[Store]:
    store = await open_store(url)
    yield store
    await store.close()


def _worker(url: str, log: Path, name: str, tmp_path: Path, *hold: str) -> subprocess.Popen[Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (tmp_path / f"{name}.log").open("ab") as errors:
        return start(
            [sys.executable, str(WORKER), url, str(log), name, *hold], stderr=errors, env=env
        )


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _in_flight_peak(lines: list[str]) -> int:
    running = peak = 0
    for line in lines:
        if line.startswith("start "):
            running += 1
            peak = max(peak, running)
        elif line.startswith("end "):
            running -= 1
    return peak


async def _all_settled(store: Store, ids: list[str]) -> bool:
    subs = [await store.get_submission(i) for i in ids]
    return all(s.status is SubmissionStatus.SETTLED for s in subs)


async def test_one_run_in_flight_across_two_worker_processes(
    url: str, shared: Store, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    api = Runtime({"a": definition(Logged(log, "api", hold=False))}, shared)
    await api.start(worker=False)
    try:
        workers = [_worker(url, log, f"w{n}", tmp_path) for n in range(2)]
        ids = [
            (await api.dispatch("a", "acme", f"s{n}", session=f"s{n}")).submission_id
            for n in range(6)
        ]
        await eventually_awaited(
            lambda: _all_settled(shared, ids),
            lambda: "\n".join(_lines(log)) + (tmp_path / "w0.log").read_text(),
        )
        lines = _lines(log)
        assert sum(line.startswith("start ") for line in lines) == 6
        assert _in_flight_peak(lines) == 1, lines
        outcomes = [(await shared.get_submission(i)).settlement or {} for i in ids]
        assert all(o.get("status") == "succeeded" for o in outcomes)
        for worker in workers:
            reap(worker)
    finally:
        await api.close()


async def test_a_killed_workers_slot_comes_back(url: str, shared: Store, tmp_path: Path) -> None:
    """SIGKILL the worker holding the agent's one slot: the next run waits for the limit
    meanwhile (its waiting reason ``limit``), then another worker runs both once the dead
    worker's slot and claim are given back (its lease, or its liveness lock)."""
    log = tmp_path / "calls.log"
    api = Runtime({"a": definition(Logged(log, "api", hold=False))}, shared)
    await api.start(worker=False)
    try:
        holder = _worker(url, log, "holder", tmp_path, "--hold")
        first = (await api.dispatch("a", "acme", "first", session="one")).submission_id
        await eventually_awaited(
            lambda: asyncio.to_thread(lambda: "start holder first" in _lines(log)),
            lambda: (tmp_path / "holder.log").read_text(),
        )
        second = (await api.dispatch("a", "acme", "second", session="two")).submission_id
        info = await api.submission(second)
        assert info.status is SubmissionStatus.QUEUED and info.waits_for_a_limit
        kill(holder)
        survivor = _worker(url, log, "survivor", tmp_path)
        await eventually_awaited(
            lambda: _all_settled(shared, [first, second]),
            lambda: "\n".join(_lines(log)) + (tmp_path / "survivor.log").read_text(),
        )
        lines = _lines(log)
        assert {"end survivor first", "end survivor second"} <= set(lines), lines
        assert _in_flight_peak([x for x in lines if "holder" not in x]) == 1
        assert not (await api.submission(second)).waits_for_a_limit
        reap(survivor)
    finally:
        await api.close()
