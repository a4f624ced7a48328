"""The PostgreSQL store under several workers: admissions and claims per second, and the
engine's admission → settled latency beside SQLite.

    python benchmarks/postgres.py [--url postgresql://...] [--submissions 2000] [--samples 200]
    python benchmarks/postgres.py --submissions 40 --samples 10   # a CI smoke run

Each worker is a process with its own store (pool and LISTEN connection), as on separate
machines (``--tasks``: asyncio tasks in this process instead, each still with its own store).
Every run starts on a fresh schema, created and dropped by this script, with ``--submissions``
queued submissions in as many sessions (so every one is a runnable session head). The schemas
are made in the database ``--url`` names, else ``TETHER_BENCH_POSTGRES_URL`` or
``TETHER_TEST_POSTGRES_URL``; told none, the script creates a database of its own on the
local server (``postgresql://postgres@127.0.0.1:5432``) and drops it at the end:

- admissions/s: the workers admit them, each its share, one ``admit`` per transaction;
- claims/s, single: each worker ``claim``\\ s the ids of its share one at a time;
- claims/s, ``claim_runnable`` x1: each worker asks for one runnable head at a time (workers
  race for the same heads: ``SKIP LOCKED`` sends them past each other's);
- claims/s, batched: ``claim_runnable`` with ``--batch`` attempt ids per transaction.

The latency rows dispatch one submission at a time through a ``tether.engine.Runtime`` with a
zero-latency model and wait for its settlement, on PostgreSQL and on SQLite
(``synchronous=FULL``, the baseline) in the same run.

It ends with its goals, judged from 1,000 submissions and 4 workers (latency: from 100
samples): admissions/s and claims/s one at a time (``claim`` and ``claim_runnable`` x1) at
least 2,000 with 4 workers, batched claims at least 10,000/s with 4 workers, admission →
settled p50 at most 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import psycopg
from psycopg import sql
from pydantic import JsonValue

from benchmarks._measure import LOCAL_POSTGRES, own_database, percentile, scratch, told_postgres_url
from benchmarks._table import Goal, judged, print_goals, print_table
from tether._ids import new_ulid
from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.errors import ClaimLost
from tether.journal import Turn
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.store import NewSubmission, SessionKey, SqliteStore, Store
from tether.store.postgres import PostgresStore

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


async def _worker_main(
    url: str, role: Role, share: list[int], run: str, batch: int, ready: Any, out: Any
) -> None:
    async with await PostgresStore.open(url, pool_max=POOL_MAX) as store:
        ready.wait()  # every worker connected: start together
        start = time.monotonic()
        done = await _work(store, role, share, run, batch)
        out.put((start, time.monotonic(), done))


def _worker_process(
    url: str, role: Role, share: list[int], run: str, batch: int, ready: Any, out: Any
) -> None:
    asyncio.run(_worker_main(url, role, share, run, batch, ready, out))


def _in_processes(
    url: str, role: Role, shares: list[list[int]], run: str, batch: int
) -> tuple[float, int]:
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(len(shares))
    out = context.Queue()
    processes = [
        context.Process(
            target=_worker_process, args=(url, role, share, run, batch, ready, out), daemon=True
        )
        for share in shares
    ]
    for process in processes:
        process.start()
    results = [out.get(timeout=600) for _ in processes]
    for process in processes:
        process.join(60)
        if process.exitcode != 0:
            raise RuntimeError(f"a {role} worker failed (exit code {process.exitcode})")
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    return end - start, sum(r[2] for r in results)


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
    url: str, role: Role, workers: int, total: int, run: str, batch: int, tasks: bool
) -> float:
    shares = [list(range(k, total, workers)) for k in range(workers)]
    if tasks:
        elapsed, done = await _in_tasks(url, role, shares, run, batch)
    else:
        elapsed, done = await asyncio.to_thread(_in_processes, url, role, shares, run, batch)
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
    for role in ("claim", "claim_runnable", "batched"):
        url = await schemas.fresh()
        run = uuid.uuid4().hex[:8]
        rates.setdefault("admit", []).append(
            await _rate(url, "admit", workers, total, run, batch, tasks)
        )
        rates[role] = [await _rate(url, role, workers, total, run, batch, tasks)]
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


def _database(url: str | None) -> tuple[contextlib.AbstractContextManager[str], str]:
    """The database to make the schemas in, the one named else one of this run's own, and
    which of the two it is (the URL is not printed: it may hold a password)."""
    told = url or told_postgres_url()
    if told is not None:
        return contextlib.nullcontext(told), "schemas in the database it was told"
    return own_database(LOCAL_POSTGRES), "schemas in a database of its own, dropped at the end"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url",
        help="a database to make the schemas in (default: $TETHER_BENCH_POSTGRES_URL, else "
        "$TETHER_TEST_POSTGRES_URL, else a database of the run's own on the local server)",
    )
    parser.add_argument("--submissions", type=int, default=2000, help="per throughput run")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--batch", type=int, default=32, help="attempt ids per batched claim")
    parser.add_argument("--samples", type=int, default=200, help="latency samples per store")
    parser.add_argument("--tasks", action="store_true", help="workers as tasks, not processes")
    args = parser.parse_args()

    database_context, where = _database(args.url)
    with database_context as database:
        schemas = Schemas(database)
        try:
            figures = {
                w: await throughput(schemas, w, args.submissions, args.batch, args.tasks)
                for w in args.workers
            }
            async with await PostgresStore.open(await schemas.fresh()) as store:
                pg_times = await latency(store, args.samples)
        finally:
            schemas.drop()
    with scratch() as tmp:
        async with await SqliteStore.open(tmp) as sqlite:
            sqlite_times = await latency(sqlite, args.samples)

    rows: list[tuple[str, ...]] = []
    labels = {
        "admit": "admissions/s",
        "claim": "claims/s, claim() one at a time",
        "claim_runnable": "claims/s, claim_runnable() x1",
        "batched": f"claims/s, claim_runnable() x{args.batch}",
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
    kind = "asyncio tasks" if args.tasks else "processes"
    print_table(
        f"PostgreSQL store: {args.submissions:,} submissions per run, workers as {kind} "
        f"(each with its own store); {args.samples} latency samples, zero-latency model; "
        f"{where}",
        ("metric", "postgresql", "sqlite (FULL)"),
        rows,
    )

    goals: list[Goal] = []
    at = figures.get(JUDGED_WORKERS)
    big = args.submissions >= JUDGED_SUBMISSIONS
    w = JUDGED_WORKERS
    for role, label, floor in (
        ("admit", "admissions/s", SINGLE_GOAL),
        ("claim", "claims/s, claim() one at a time", SINGLE_GOAL),
        ("claim_runnable", "claims/s, claim_runnable() x1", SINGLE_GOAL),
        ("batched", f"claims/s, claim_runnable() x{args.batch}", BATCHED_GOAL),
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
    print_goals(goals)


if __name__ == "__main__":
    asyncio.run(main())
