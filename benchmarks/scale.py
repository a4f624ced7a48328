"""Scale: the cost of one submission on a store that already holds many settled ones.

    python benchmarks/scale.py [--sizes 1000 10000 100000] [--submissions 100] [--rounds 3]
                               [--postgres-url postgresql://...]
    python benchmarks/scale.py --sizes 100 1000 --submissions 10 --rounds 1   # a CI smoke run

For each backend (SQLite always; PostgreSQL with ``--postgres-url`` or
``TETHER_BENCH_POSTGRES_URL``, skipped otherwise) and each size N, a fresh store (a new
SQLite file; a new schema, created and dropped here, in the database the URL names) is filled
with N settled submissions, each in a conversation of its own, exactly as the engine leaves a
chat turn of the demo assistant: the submission admitted (its conversation and
``conversation_created`` record with it), claimed by a worker, and settled in the commit that
appends its records (``execution_started`` … ``submission_settled``, the ones one real turn
wrote, with their ids made anew). The fill goes through the store's own API, ``--batch``
submissions at a time (their writes are committed together: SQLite's group commit, a pool of
connections on PostgreSQL), on a second store object opened without fsync at commit
(``synchronous=OFF``; ``synchronous_commit=off``): what it leaves is the same, only the fill
is faster. PostgreSQL's tables are then vacuumed and analyzed, as autovacuum would have done
on a store that grew to that size.

Then a ``tether.engine.Runtime`` with the demo agents, on that store opened as a server opens
it, runs ``--sessions`` warm-up turns (one per session), then ``--rounds`` rounds of
``--submissions`` submissions, one at a time, in turn over the sessions: ``dispatch`` then
``wait``. Per submission: CPU (``time.process_time``, every thread of this process; on
PostgreSQL plus the CPU of the store's server backends, from ``/proc``, when the server runs
on this machine) and the wall-clock p50, the median of the rounds.

Goal (issue 19): per-submission CPU at 100k settled submissions within 1.2x of its figure at
1k, on each backend; judged only when the largest size is at least 100k and 100 times the
smallest.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = os.path.realpath(Path(__file__).parent)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != _here]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg
from psycopg import sql

from benchmarks._measure import percentile, scratch
from benchmarks._table import Goal, judged, print_goals, print_table
from tether._ids import new_ulid
from tether.demo import demo_agents
from tether.engine import Runtime
from tether.records import Payload, RecordDraft
from tether.store import ClaimSettlement, NewSubmission, SessionKey, SqliteStore, Store
from tether.store.postgres import PostgresStore

AGENT = "assistant"
GOAL = 1.2  # per-submission CPU at the largest size, at most this times the smallest's
JUDGED_LARGEST = 100_000
JUDGED_SPAN = 100  # the largest size at least this times the smallest
LEASE = timedelta(minutes=10)
WAIT_SECONDS = 60.0  # one submission of the measurement, at most
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- what one turn of the demo assistant leaves -----------------------------------------


@dataclass(frozen=True)
class Template:
    """One settled chat turn, as the engine wrote it: the submission's input and settlement,
    and the records after ``conversation_created`` (payload, and which ids each carries)."""

    input: Mapping[str, Any]
    settlement: Mapping[str, Any]
    records: Sequence[tuple[Payload, bool, bool, bool, int | None]]

    def drafts(self, submission_id: str, attempt_id: str, execution_id: str) -> list[RecordDraft]:
        return [
            RecordDraft(
                payload,
                submission_id=submission_id if submission else None,
                attempt_id=attempt_id if attempt else None,
                execution_id=execution_id if execution else None,
                turn=turn,
            )
            for payload, submission, attempt, execution, turn in self.records
        ]


async def template() -> Template:
    """Run one turn through the real engine (in memory) and keep what it wrote."""
    async with Runtime(demo_agents(), "memory://") as runtime:
        receipt = await runtime.dispatch(AGENT, "template", "hello")
        async with asyncio.timeout(WAIT_SECONDS):
            await runtime.wait(receipt.submission_id)
        submission = await runtime.store.get_submission(receipt.submission_id)
        records = await runtime.store.read(receipt.conversation_id)
    assert submission.settlement is not None and records[0].kind == "conversation_created"
    return Template(
        input=dict(submission.input),
        settlement=dict(submission.settlement),
        records=[
            (
                r.payload,
                r.submission_id is not None,
                r.attempt_id is not None,
                r.execution_id is not None,
                r.turn,
            )
            for r in records[1:]
        ],
    )


# --- the fill -----------------------------------------------------------------------------


async def _settle_one(store: Store, turn: Template, key: SessionKey, owner: str) -> None:
    """Admit, claim and settle one submission in a conversation of its own."""
    now = datetime.now(UTC)
    submission_id, conversation_id = new_ulid(), new_ulid()
    attempt_id, execution_id = new_ulid(), new_ulid()
    admitted = await store.admit(
        NewSubmission(
            id=submission_id,
            key=key,
            conversation_id=conversation_id,
            input=turn.input,
            created_at=now,
        )
    )
    assert admitted.created
    claimed = await store.claim(
        submission_id, attempt_id=attempt_id, owner_id=owner, lease_expires_at=now + LEASE, now=now
    )
    await store.append_settled(
        conversation_id,
        turn.drafts(submission_id, attempt_id, execution_id),
        expected_seq=1,
        fence=claimed.fence,
        settle=ClaimSettlement(submission_id, attempt_id, turn.settlement, datetime.now(UTC)),
    )


async def fill(store: Store, turn: Template, size: int, batch: int) -> float:
    """``size`` settled submissions, ``batch`` at a time; returns the seconds it took."""
    owner = f"worker-{new_ulid()}"  # one worker did them all; it is gone now
    start = time.perf_counter()
    for first in range(0, size, batch):
        async with asyncio.TaskGroup() as group:
            for n in range(first, min(first + batch, size)):
                group.create_task(_settle_one(store, turn, SessionKey(AGENT, f"fill-{n}"), owner))
    return time.perf_counter() - start


async def check_filled(store: Store, turn: Template, size: int) -> None:
    """The last conversation filled holds one settled turn, as the template's."""
    conversation = await store.find_conversation(SessionKey(AGENT, f"fill-{size - 1}"))
    records = await store.read(conversation.id)
    assert [r.kind for r in records[1:]] == [p.KIND for p, *_ in turn.records], records
    assert await store.verify(conversation.id) == len(records)


# --- the measurement ----------------------------------------------------------------------


@dataclass
class Figures:
    size: int
    fill_seconds: float
    cpu_ms: float  # per submission: this process (and the PostgreSQL backends, if any)
    process_ms: float  # per submission: this process alone
    p50_ms: float
    p99_ms: float


class BackendCpu:
    """The CPU seconds of a store's PostgreSQL backends (found by their application_name),
    from ``/proc``: only when the server runs on this machine, else ``None``."""

    def __init__(self, base_url: str, application: str) -> None:
        self.base_url = base_url
        self.application = application

    def read(self) -> dict[int, float] | None:
        with psycopg.connect(self.base_url, autocommit=True, connect_timeout=10) as conn:
            pids = [
                int(row[0])
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
                    (self.application,),
                )
            ]
        seconds: dict[int, float] = {}
        for pid in pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None  # another machine's (or another namespace's) process
            fields = stat[stat.rindex(")") + 2 :].split()
            seconds[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        return seconds


def _spent(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    if before is None or after is None:
        return None
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


async def measure(
    store: Store,
    *,
    submissions: int,
    sessions: int,
    rounds: int,
    backends: BackendCpu | None,
) -> tuple[float, float, float, float]:
    """Per submission: CPU ms (process + backends), process CPU ms, p50 ms, p99 ms (each the
    median of the rounds)."""
    cpus, processes, p50s, p99s = [], [], [], []
    async with Runtime(demo_agents(), store) as runtime:

        async def one(instance: str) -> float:
            start = time.perf_counter()
            receipt = await runtime.dispatch(AGENT, instance, "hello")
            async with asyncio.timeout(WAIT_SECONDS):
                settled = await runtime.wait(receipt.submission_id)
            assert settled["status"] == "succeeded", settled
            return time.perf_counter() - start

        for s in range(sessions):  # warm: the sessions' conversations, the caches
            await one(f"bench-{s}")
        for _ in range(rounds):
            db_before = await asyncio.to_thread(backends.read) if backends else None
            cpu = time.process_time()
            times = [await one(f"bench-{n % sessions}") for n in range(submissions)]
            process = time.process_time() - cpu
            db = _spent(db_before, await asyncio.to_thread(backends.read)) if backends else 0.0
            processes.append(process / submissions * 1000)
            cpus.append((process + (db or 0.0)) / submissions * 1000)
            p50s.append(statistics.median(times) * 1000)
            p99s.append(percentile(times, 0.99) * 1000)
    return (
        statistics.median(cpus),
        statistics.median(processes),
        statistics.median(p50s),
        statistics.median(p99s),
    )


# --- backends -----------------------------------------------------------------------------


async def run_sqlite(turn: Template, args: argparse.Namespace) -> list[Figures]:
    figures = []
    for size in args.sizes:
        with scratch("tether-scale-") as directory:
            path = directory / "tether.db"
            async with await SqliteStore.open(path, synchronous="OFF") as filler:
                seconds = await fill(filler, turn, size, args.batch)
                await check_filled(filler, turn, size)
            async with await SqliteStore.open(path) as store:  # as tether serve opens it
                cpu, process, p50, p99 = await measure(
                    store,
                    submissions=args.submissions,
                    sessions=args.sessions,
                    rounds=args.rounds,
                    backends=None,
                )
        figures.append(Figures(size, seconds, cpu, process, p50, p99))
        _progress("sqlite", figures[-1])
    return figures


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = "&".join(q for q in (parts.query, urlencode(params)) if q)
    return urlunsplit(parts._replace(query=query))


@asynccontextmanager
async def fresh_schema(base: str) -> AsyncIterator[str]:
    """A new schema in the database ``base`` names, dropped on the way out; yields its name."""
    schema = f"bench_scale_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _vacuum_analyze(base: str, schema: str) -> None:
    with psycopg.connect(base, autocommit=True, connect_timeout=10) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            conn.execute(
                sql.SQL("VACUUM (ANALYZE) {}.{}").format(
                    sql.Identifier(schema), sql.Identifier(table)
                )
            )


async def run_postgres(base: str, turn: Template, args: argparse.Namespace) -> list[Figures]:
    figures = []
    for size in args.sizes:
        async with fresh_schema(base) as schema:
            application = f"tether-scale-{uuid.uuid4().hex[:8]}"
            url = _with_query(base, schema=schema, application_name=application)
            # No fsync at commit for the fill (libpq takes -cname=value without a space).
            fast = _with_query(url, options="-csynchronous_commit=off")
            async with await PostgresStore.open(fast, pool_max=args.pool) as filler:
                seconds = await fill(filler, turn, size, args.batch)
                await check_filled(filler, turn, size)
            await asyncio.to_thread(_vacuum_analyze, base, schema)
            async with await PostgresStore.open(url) as store:
                cpu, process, p50, p99 = await measure(
                    store,
                    submissions=args.submissions,
                    sessions=args.sessions,
                    rounds=args.rounds,
                    backends=BackendCpu(base, application),
                )
        figures.append(Figures(size, seconds, cpu, process, p50, p99))
        _progress("postgresql", figures[-1])
    return figures


def _progress(backend: str, f: Figures) -> None:
    print(
        f"{backend}, {f.size:,} settled: filled in {f.fill_seconds:.1f} s, "
        f"{f.cpu_ms:.2f} ms CPU a submission, p50 {f.p50_ms:.2f} ms",
        flush=True,
    )


# --- the report ---------------------------------------------------------------------------


def report(results: dict[str, list[Figures] | str], args: argparse.Namespace) -> None:
    rows: list[list[str]] = []
    for backend, figures in results.items():
        if isinstance(figures, str):
            rows.append([backend, "", figures, "", "", "", "", ""])
            continue
        first = figures[0]
        for f in figures:
            rows.append(
                [
                    backend,
                    f"{f.size:,}",
                    f"{f.size / f.fill_seconds:,.0f}/s",
                    f"{f.cpu_ms:.2f}",
                    f"{f.process_ms:.2f}",
                    f"{f.cpu_ms / first.cpu_ms:.2f}x" if first.cpu_ms else "n/a",
                    f"{f.p50_ms:.2f}",
                    f"{f.p99_ms:.2f}",
                ]
            )
    print_table(
        f"One submission (dispatch -> wait, demo assistant) on a store of N settled "
        f"submissions: {args.rounds} x {args.submissions} submissions over {args.sessions} "
        "sessions, medians of the rounds; CPU on PostgreSQL counts its backends too",
        [
            "backend",
            "settled (N)",
            "fill rate",
            "CPU ms/sub",
            "process CPU ms/sub",
            "CPU vs smallest",
            "p50 ms",
            "p99 ms",
        ],
        rows,
    )

    smallest, largest = min(args.sizes), max(args.sizes)
    judge = largest >= JUDGED_LARGEST and largest >= JUDGED_SPAN * smallest
    goals = []
    for backend, figures in results.items():
        goal = f"per-submission CPU at {largest:,} ≤ {GOAL:g}x of {smallest:,} ({backend})"
        if isinstance(figures, str):
            goals.append(Goal(goal, figures, None))
            continue
        by_size = {f.size: f for f in figures}
        low, high = by_size[smallest].cpu_ms, by_size[largest].cpu_ms
        ratio = high / low if low else float("inf")
        measured = f"{ratio:.2f}x ({low:.2f} → {high:.2f} ms)"
        goals.append(Goal(goal, measured, judged(ratio <= GOAL, judge)))
    print_goals(goals)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--submissions", type=int, default=100, help="measured, per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=4, help="the measured ones go over")
    parser.add_argument("--batch", type=int, default=500, help="submissions per fill batch")
    parser.add_argument("--pool", type=int, default=16, help="PostgreSQL connections, fill")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("TETHER_BENCH_POSTGRES_URL"),
        help="a database to make schemas in (default: TETHER_BENCH_POSTGRES_URL; "
        "without either, PostgreSQL is skipped)",
    )
    parser.add_argument(
        "--no-sqlite", action="store_true", help="PostgreSQL only (with --postgres-url)"
    )
    args = parser.parse_args()
    if min(args.sizes) < 1 or args.submissions < 1 or args.rounds < 1 or args.sessions < 1:
        parser.error("sizes, --submissions, --rounds and --sessions must be at least 1")
    args.sizes = sorted(set(args.sizes))

    turn = await template()
    results: dict[str, list[Figures] | str] = {}
    if not args.no_sqlite:
        results["sqlite"] = await run_sqlite(turn, args)
    if args.postgres_url:
        results["postgresql"] = await run_postgres(args.postgres_url, turn, args)
    else:
        line = "skipped: no --postgres-url (or TETHER_BENCH_POSTGRES_URL)"
        print(f"postgresql: {line}", flush=True)
        results["postgresql"] = line
    report(results, args)


if __name__ == "__main__":
    asyncio.run(main())
