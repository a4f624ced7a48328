"""The PostgreSQL store under several workers, and the whole served path beside DBOS's.

    python benchmarks/postgres.py [--url postgresql://...] [--submissions 1000] [--samples 100]
    python benchmarks/postgres.py --submissions 40 --samples 10 --workers 1 2   # a CI smoke run
    python benchmarks/postgres.py --only served --results benchmarks/results   # and a page

**The served path** (``benchmarks/_served.py``): N ``tether worker`` processes (N =
``--workers``) drain a backlog of ``--submissions`` submissions, a zero-latency model and one
idempotent tool call each (workload ``one``), then as many with a tool call in each of three
turns (``three``); beside them, in the same run and on the same database, N DBOS queue workers
(``benchmarks/peers/dbos_queue.py``; skipped without ``pip install tether[bench]``) drain the
same workloads. Per side, workload and N: settled/s between the 10th and 90th percentile
settlements, how long the backlog waited (p50/p99, from the moment every worker could start),
claim → settled, and ``--samples`` submissions admitted one at a time with the workers idle
(admission → settled). Then each side once more with one worker through a counting proxy
(``benchmarks/_pgwire.py``; this server has no ``pg_stat_statements``): statements, round trips
and commits per submission, and one submission's statements from claim to settlement, class by
class and in order. Goal: Tether at least 2x DBOS's settled/s at every N, on both workloads.

**The store** (as before): each worker is a process with its own store (pool and LISTEN
connection), as on separate machines (``--tasks``: asyncio tasks in this process instead, each
still with its own store). Every run starts on a fresh schema, created and dropped by this
script, with ``--submissions`` queued submissions in as many sessions (so every one is a
runnable session head). The schemas are made in the database ``--url`` names, else
``TETHER_BENCH_POSTGRES_URL`` or ``TETHER_TEST_POSTGRES_URL``; told none, the script creates a
database of its own on the local server (``postgresql://postgres@127.0.0.1:5432``) and drops
it at the end:

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
settled p50 at most 5 ms; and the served path's, at every N (judged from 1,000 submissions).
``--results DIR`` also writes what it printed to ``DIR/<date>-postgres.md``, with a plot of
settled/s against N beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import psycopg

from benchmarks import _served_run
from benchmarks._measure import LOCAL_POSTGRES, own_database, told_postgres_url
from benchmarks._pg_page import Tee, write_results
from benchmarks._pg_store import Schemas
from benchmarks._pg_store import section as store_section
from benchmarks._table import Goal, print_goals


def _database(url: str | None) -> tuple[contextlib.AbstractContextManager[str], str]:
    """The database to make the schemas in, the one named else one of this run's own, and
    which of the two it is (the URL is not printed: it may hold a password)."""
    told = url or told_postgres_url()
    if told is not None:
        return contextlib.nullcontext(told), "schemas in the database it was told"
    return own_database(LOCAL_POSTGRES), "schemas in a database of its own, dropped at the end"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url",
        help="a database to make the schemas in (default: $TETHER_BENCH_POSTGRES_URL, else "
        "$TETHER_TEST_POSTGRES_URL, else a database of the run's own on the local server)",
    )
    parser.add_argument(
        "--submissions", type=int, default=1000, help="per throughput run and served backlog"
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--batch", type=int, default=32, help="attempt ids per batched claim")
    parser.add_argument(
        "--samples", type=int, default=100, help="latency samples per store and served run"
    )
    parser.add_argument("--tasks", action="store_true", help="workers as tasks, not processes")
    parser.add_argument(
        "--only", choices=("store", "served"), help="run one section (default: both)"
    )
    parser.add_argument(
        "--dbos-poll",
        type=float,
        default=0.05,
        help="DBOS's queue polling_interval_sec (its default, 1 s, would cap a worker at 64 "
        "workflows a second)",
    )
    parser.add_argument("--no-dbos", action="store_true", help="the served path: Tether only")
    parser.add_argument(
        "--count-submissions",
        type=int,
        help="per workload, counted on the wire (default: --submissions, at most 200; "
        "0: count nothing)",
    )
    parser.add_argument(
        "--singles", type=int, default=3, help="single submissions recorded statement by statement"
    )
    parser.add_argument(
        "--results", type=Path, help="also write <date>-postgres.md and its plot in this folder"
    )
    return parser


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _served_section(
    args: argparse.Namespace, database: str
) -> tuple[_served_run.Served, list[Goal]]:
    served = await _served_run.run(
        database,
        args.workers,
        args.submissions,
        args.samples,
        count_submissions=(
            min(args.submissions, 200) if args.count_submissions is None else args.count_submissions
        ),
        dbos=not args.no_dbos,
        singles=args.singles,
        poll=args.dbos_poll,
        log=_progress,
    )
    _served_run.report(served)
    return served, _served_run.goals(served)


async def main() -> None:
    args = _parser().parse_args()
    started = time.monotonic()
    tee = Tee(sys.stdout) if args.results else None
    served: _served_run.Served | None = None
    with contextlib.redirect_stdout(tee) if tee is not None else contextlib.nullcontext():
        database_context, where = _database(args.url)
        goals: list[Goal] = []
        with database_context as database:
            with psycopg.connect(database) as conn:
                row = conn.execute("SHOW server_version").fetchone()
                server_version = str(row[0]) if row else "?"
            if args.only in (None, "store"):
                schemas = Schemas(database)
                try:
                    goals += await store_section(
                        schemas,
                        where,
                        workers=args.workers,
                        submissions=args.submissions,
                        batch=args.batch,
                        samples=args.samples,
                        tasks=args.tasks,
                    )
                finally:
                    schemas.drop()
            if args.only in (None, "served"):
                served, served_goals = await _served_section(args, database)
                goals += served_goals
        print_goals(goals)
    if tee is not None:
        how = (__doc__ or "").split("**The served path**", 1)[-1].split("**The store**", 1)[0]
        write_results(
            args.results,
            tee.kept.getvalue(),
            served,
            started,
            server_version,
            how="**The served path**" + how if served is not None else "",
        )


if __name__ == "__main__":
    asyncio.run(main())
