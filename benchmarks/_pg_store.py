"""The store section of ``benchmarks/postgres.py``: admissions and claims per second under
several workers, and admission -> settled through an in-process runtime beside SQLite.

Each worker is a process with its own store (pool and LISTEN connection), as on separate
machines (``tasks``: asyncio tasks in the caller's process instead), spawned once per worker
count and sent every run of it. Every run starts on a fresh schema (``Schemas``) with
``submissions`` queued submissions in as many sessions (so every one is a runnable head).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import statistics
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import psycopg
from psycopg import sql
from pydantic import JsonValue

from benchmarks._measure import percentile, scratch
from benchmarks._table import Goal, judged, print_table
from tether._ids import new_ulid
from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.errors import ClaimLost
from tether.journal import Turn
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.store import NewSubmission, SessionKey, SqliteStore, Store
from tether.store.postgres import PostgresStore

__all__ = ("JUDGED_SUBMISSIONS", "Schemas", "latency", "section", "throughput")

Role = Literal["admit", "claim", "claim_runnable", "batched"]
LEASE = timedelta(minutes=10)  # no lease expires during a run
LATENCY_GOAL_MS = 5.0
SINGLE_GOAL = 2_000.0  # /s with 4 workers
BATCHED_GOAL = 10_000.0  # /s
POOL_MAX = 2  # a worker runs one transaction at a time


def _url(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def _new(n: int, run: str) -> NewSubmission:
    return NewSubmission(
        id=f"{run}-s{n}",
        key=SessionKey("bench", "i", f"{run}-{n}"),
        conversation_id=f"{run}-c{n}",
        input={"kind": "message", "body": "hello"},
        created_at=datetime.now(UTC),
    )


# --- one worker's share of a run --------------------------------------------------------


async def _work(
    store: PostgresStore, role: Role, share: Sequence[int], run: str, batch: int
) -> int:
    """Do ``role`` for this worker's share; returns how many admissions or claims it made."""
    owner = f"bench-{uuid.uuid4().hex[:8]}"
    done = 0
    if role == "admit":
        for n in share:
            await store.admit(_new(n, run))
            done += 1
        return done
    if role == "claim":
        for n in share:
            now = datetime.now(UTC)
            try:
                await store.claim(
                    f"{run}-s{n}",
                    attempt_id=new_ulid(),
                    owner_id=owner,
                    lease_expires_at=now + LEASE,
                    now=now,
                )
                done += 1
            except ClaimLost:
                pass
        return done
    size = batch if role == "batched" else 1
    while True:
        now = datetime.now(UTC)
        claimed = await store.claim_runnable(
            attempt_ids=[new_ulid() for _ in range(size)],
            owner_id=owner,
            lease_expires_at=now + LEASE,
            now=now,
        )
        if not claimed:
            return done
        done += len(claimed)


Command = tuple[str, Role, list[int], str, int]
"""(url, role, share, run, batch): one worker's part of a run."""


async def _worker_main(command: Command, ready: Any) -> tuple[float, float, int]:
    url, role, share, run, batch = command
    async with await PostgresStore.open(url, pool_max=POOL_MAX) as store:
        ready.wait()  # every worker connected: start together
        start = time.monotonic()
        done = await _work(store, role, share, run, batch)
        return start, time.monotonic(), done


def _worker_process(commands: Any, ready: Any, out: Any) -> None:
    """A worker for every run of one worker count: spawned once (an interpreter's start-up
    is slower than a run of a CI-sized benchmark), it does the commands it is sent in turn."""
    while (command := commands.get()) is not None:
        out.put(asyncio.run(_worker_main(command, ready)))


class Processes:
    """``n`` worker processes, each with a store of its own for every run it is sent."""

    def __init__(self, n: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.ready = context.Barrier(n)
        self.out: Any = context.Queue()
        self.commands: list[Any] = [context.Queue() for _ in range(n)]
        self.processes = [
            context.Process(
                target=_worker_process, args=(commands, self.ready, self.out), daemon=True
            )
            for commands in self.commands
        ]
        for process in self.processes:
            process.start()

    def run(
        self, url: str, role: Role, shares: list[list[int]], run: str, batch: int
    ) -> tuple[float, int]:
        for commands, share in zip(self.commands, shares, strict=True):
            commands.put((url, role, share, run, batch))
        results = []
        for _ in self.processes:
            try:
                results.append(self.out.get(timeout=600))
            except queue.Empty:
                codes = [p.exitcode for p in self.processes]
                raise RuntimeError(f"a {role} worker failed (exit codes {codes})") from None
        start = min(r[0] for r in results)
        end = max(r[1] for r in results)
        return end - start, sum(r[2] for r in results)

    def close(self) -> None:
        for commands in self.commands:
            commands.put(None)
        for process in self.processes:
            process.join(60)
            if process.is_alive():
                process.kill()


async def _in_tasks(
    url: str, role: Role, shares: list[list[int]], run: str, batch: int
) -> tuple[float, int]:
    stores = [await PostgresStore.open(url, pool_max=POOL_MAX) for _ in shares]
    try:
        start = time.monotonic()
        counts = await asyncio.gather(
            *(
                _work(store, role, share, run, batch)
                for store, share in zip(stores, shares, strict=True)
            )
        )
        return time.monotonic() - start, sum(counts)
    finally:
        for store in stores:
            await store.close()


async def _rate(
    url: str,
    role: Role,
    workers: int,
    total: int,
    run: str,
    batch: int,
    processes: Processes | None,
) -> float:
    shares = [list(range(k, total, workers)) for k in range(workers)]
    if processes is None:
        elapsed, done = await _in_tasks(url, role, shares, run, batch)
    else:
        elapsed, done = await asyncio.to_thread(processes.run, url, role, shares, run, batch)
    if done != total:
        raise AssertionError(f"{role} with {workers} workers did {done} of {total}")
    return done / elapsed


# --- schemas ------------------------------------------------------------------------------


class Schemas:
    """Fresh schemas for the runs, all dropped at the end."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.created: list[str] = []

    async def fresh(self) -> str:
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        self.created.append(schema)
        async with await PostgresStore.open(_url(self.base, schema)):
            pass  # migrated
        return _url(self.base, schema)

    def drop(self) -> None:
        with psycopg.connect(self.base, autocommit=True) as conn:
            for schema in self.created:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


async def throughput(
    schemas: Schemas, workers: int, total: int, batch: int, tasks: bool
) -> dict[str, float]:
    """Per claim mode: admit ``total`` on a fresh schema, then claim them all."""
    rates: dict[str, list[float]] = {}
    processes = None if tasks else await asyncio.to_thread(Processes, workers)
    try:
        for role in ("claim", "claim_runnable", "batched"):
            url = await schemas.fresh()
            run = uuid.uuid4().hex[:8]
            rates.setdefault("admit", []).append(
                await _rate(url, "admit", workers, total, run, batch, processes)
            )
            rates[role] = [await _rate(url, role, workers, total, run, batch, processes)]
    finally:
        if processes is not None:
            await asyncio.to_thread(processes.close)
    return {role: statistics.median(values) for role, values in rates.items()}


# --- admission -> settled through the engine ----------------------------------------------


class ChatHarness:
    """One model call over the whole history, as in ``benchmarks/engine.py``."""

    name, version = "chat", "1"

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="bench", messages=(*turn.history, *turn.inputs))
        return (await turn.model(request)).message.text


async def latency(store: Store, samples: int) -> list[float]:
    model = ScriptedModel(lambda request: "x" * 300)
    agents = {
        "chat": AgentDefinition(lambda instance, env: AgentSpec(harness=ChatHarness(), model=model))
    }
    times = []
    async with Runtime(agents, store, claim_interval=0.25) as runtime:
        for n in range(-min(10, samples), samples):  # the first few warm the caches
            start = time.perf_counter()
            receipt = await runtime.dispatch("chat", f"latency-{n}", "hello")
            settled = await runtime.wait(receipt.submission_id)
            assert settled["status"] == "succeeded", settled
            if n >= 0:
                times.append((time.perf_counter() - start) * 1000)
    return times


# --- the table ------------------------------------------------------------------------------


JUDGED_SUBMISSIONS = 1_000
JUDGED_WORKERS = 4
JUDGED_SAMPLES = 100


async def section(
    schemas: Schemas,
    where: str,
    *,
    workers: Sequence[int],
    submissions: int,
    batch: int,
    samples: int,
    tasks: bool,
) -> list[Goal]:
    """Run the store's rows, print their table; returns their goals."""
    figures = {w: await throughput(schemas, w, submissions, batch, tasks) for w in workers}
    async with await PostgresStore.open(await schemas.fresh()) as store:
        pg_times = await latency(store, samples)
    with scratch() as tmp:
        async with await SqliteStore.open(tmp) as sqlite:
            sqlite_times = await latency(sqlite, samples)

    rows: list[tuple[str, ...]] = []
    labels = {
        "admit": "admissions/s",
        "claim": "claims/s, claim() one at a time",
        "claim_runnable": "claims/s, claim_runnable() x1",
        "batched": f"claims/s, claim_runnable() x{batch}",
    }
    for role, label in labels.items():
        for w, rates in figures.items():
            plural = "s" if w > 1 else ""
            rows.append((f"{label}, {w} worker{plural}", f"{rates[role]:,.0f}", ""))
    pg50, sq50 = statistics.median(pg_times), statistics.median(sqlite_times)
    rows += [
        ("admission -> settled p50", f"{pg50:.2f} ms", f"{sq50:.2f} ms"),
        (
            "admission -> settled p99",
            f"{percentile(pg_times, 0.99):.2f} ms",
            f"{percentile(sqlite_times, 0.99):.2f} ms",
        ),
    ]
    kind = "asyncio tasks" if tasks else "processes"
    print_table(
        f"PostgreSQL store: {submissions:,} submissions per run, workers as {kind} "
        f"(each with its own store); {samples} latency samples, zero-latency model; "
        f"{where}",
        ("metric", "postgresql", "sqlite (FULL)"),
        rows,
    )

    goals: list[Goal] = []
    at = figures.get(JUDGED_WORKERS)
    big = submissions >= JUDGED_SUBMISSIONS
    w = JUDGED_WORKERS
    for role, label, floor in (
        ("admit", "admissions/s", SINGLE_GOAL),
        ("claim", "claims/s, claim() one at a time", SINGLE_GOAL),
        ("claim_runnable", "claims/s, claim_runnable() x1", SINGLE_GOAL),
        ("batched", f"claims/s, claim_runnable() x{batch}", BATCHED_GOAL),
    ):
        text = f"postgres {label}, {w} workers ≥ {floor:,.0f}/s"
        if at is None:
            goals.append(Goal(text, f"no {w}-worker run", None))
        else:
            goals.append(Goal(text, f"{at[role]:,.0f}/s", judged(at[role] >= floor, big)))
    goals.append(
        Goal(
            f"postgres admission → settled p50 ≤ {LATENCY_GOAL_MS:.0f} ms",
            f"{pg50:.2f} ms (SQLite {sq50:.2f} ms; {len(pg_times)} samples)",
            judged(pg50 <= LATENCY_GOAL_MS, len(pg_times) >= JUDGED_SAMPLES),
        )
    )
    return goals
