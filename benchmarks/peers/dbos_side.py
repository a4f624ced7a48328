"""DBOS's side: a ``@DBOS.workflow`` whose model and tool calls are ``@DBOS.step``\\ s, on a
SQLite system database (DBOS keeps SQLite's rollback journal and its default
``synchronous=FULL``). Import only when ``available()``: the decorators need ``dbos``."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID

from benchmarks.peers._fake import TEXT, TurnsResult, reply, tool_result

__all__ = ("DURABILITY", "build_log", "latency", "launched", "resume", "run_turns")

DURABILITY = "SQLite system DB: rollback journal (DBOS's default), synchronous=FULL (default)"
_role = {"gate": "return"}
_reached = threading.Event()
_reached_at = [0.0]


@DBOS.step()
def model_step(messages: list[str], turns: int) -> dict[str, Any]:
    text, call = reply((len(messages) - 1) // 2, turns)
    return {"text": text, "call": call}


@DBOS.step()
def tool_step(n: int) -> str:
    return tool_result(n)


@DBOS.step()
def gate_step() -> None:
    if _role["gate"] == "crash":
        os._exit(0)  # a kill -9 between two steps: the workflow stays PENDING


@DBOS.step()
def turn_done_step() -> None:
    _reached_at[0] = time.perf_counter()  # the turn's last step is checkpointed by now
    _reached.set()


@DBOS.workflow()
def conversation(turns: int, user: str, gate: bool = False) -> str:
    """``gate``: past the final answer, a gate step (where a build's process ends), then one
    more turn (a model step calling the tool, the tool step, the final model step)."""
    messages = [user]
    resumed = False
    while True:
        answer = model_step(messages, turns)
        messages.append(answer["text"])
        if answer["call"] is None:
            if gate and not resumed:
                gate_step()
                resumed, turns = True, turns + 1
                continue
            if gate:
                turn_done_step()
            return str(answer["text"])
        messages.append(tool_step(answer["call"]))


def _config(db: Path) -> DBOSConfig:
    return {
        "name": "tether-bench",
        "system_database_url": f"sqlite:///{db}",
        "log_level": "ERROR",
        "console_log_level": "ERROR",
        "application_version": "bench",
        "executor_id": "bench",
    }


@contextlib.contextmanager
def launched(directory: Path) -> Iterator[Path]:
    """DBOS launched on ``directory/dbos.db``, destroyed on the way out."""
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / "dbos.db"
    logging.getLogger("dbos").setLevel(logging.ERROR)
    DBOS(config=_config(db))
    DBOS.launch()
    try:
        yield db
    finally:
        DBOS.destroy(destroy_registry=False)


def run_turns(db: Path, turns: int, reps: int) -> TurnsResult:
    """In a ``launched`` DBOS: ``reps`` conversations of ``turns`` turns, one workflow each."""
    before = db.stat().st_size  # rollback journal: the file is the whole database
    seconds = []
    for rep in range(reps):
        start = time.perf_counter()
        with SetWorkflowID(f"t{turns}-{rep}-{time.time_ns()}"):
            handle = DBOS.start_workflow(conversation, turns, TEXT)
        assert handle.get_result() == TEXT
        seconds.append(time.perf_counter() - start)
    return TurnsResult(turns, seconds, db.stat().st_size - before, reps)


def latency(db: Path, samples: int) -> list[float]:
    """A 1-turn conversation: ``start_workflow`` until its result (called directly, no queue)."""
    times = []
    for n in range(samples + 5):
        start = time.perf_counter()
        handle = DBOS.start_workflow(conversation, 1, TEXT)
        assert handle.get_result() == TEXT
        if n >= 5:
            times.append((time.perf_counter() - start) * 1000)
    return times


def build_log(directory: Path, turns: int) -> int:
    """(In a process of its own, which it ends.) A workflow of ``turns`` turns that is killed
    after its last model step; returns never."""
    _role["gate"] = "crash"
    with launched(directory):
        with SetWorkflowID("resume"):
            DBOS.start_workflow(conversation, turns, TEXT, True).get_result()
    raise AssertionError("the gate step should have ended the process")


def resume(directory: Path) -> tuple[float, int]:
    """Cold resume (a fresh process): launch DBOS, whose recovery re-runs the pending workflow,
    serving its ``2 * turns + 1`` recorded steps, then runs the first turn after it (a model
    step calling the tool, the tool step, the final model step), until that turn's last step
    is checkpointed. Returns (ms, steps served)."""
    start = time.perf_counter()
    with launched(directory):
        if not _reached.wait(120):
            raise AssertionError("DBOS did not recover the workflow")
        elapsed = (_reached_at[0] - start) * 1000
        DBOS.retrieve_workflow("resume").get_result()
        steps = len(DBOS.list_workflow_steps("resume")) - 5  # the gate, the turn, its marker
    return elapsed, steps
