"""What a served submission costs the database, counted on the wire (``benchmarks/_pgwire.py``).

Used by ``benchmarks/postgres.py``. One worker per side, connected through a counting proxy
(the admitting client through another, the gate and the polls directly, uncounted):

- the idle worker's traffic for a second (what any window also holds);
- per workload, a backlog drained as in the timed runs (``benchmarks/_served.py``), the proxy's
  tally taken before the admissions and once the last settlement is in and the worker quiet:
  statements, round trips, commits and write commits a submission (the worker's), and the
  client's per admission;
- single submissions of the one-call workload, each admitted with the worker idle and
  recorded statement by statement until its settlement and a quiet ``TAIL`` after it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from benchmarks._pgwire import Proxy, Statement, Tally, label, proxied, recording, through
from benchmarks._served import Admit, Side, Workers, gated, wait_one, wait_settled

__all__ = ("Cost", "Counted", "Single", "count")

WORKLOAD = "one"  # the single submissions'
TAIL = 0.1  # s after a settlement: what the worker does because of it (its next claim) lands
IDLE = 1.0  # s of an idle worker (a quarter of that in a smoke run: under 100 submissions)


@dataclass
class Cost:
    """Per submission: the worker's statements, round trips, commits and write commits, and
    the admitting client's statements, round trips and commits."""

    statements: float
    round_trips: float
    commits: float
    write_commits: float
    admit_statements: float
    admit_round_trips: float
    admit_commits: float

    @classmethod
    def of(cls, worker: Tally, client: Tally, count: int) -> Cost:
        return cls(
            worker.statements / count,
            worker.round_trips / count,
            worker.commits / count,
            worker.write_commits / count,
            client.statements / count,
            client.round_trips / count,
            client.commits / count,
        )


@dataclass
class Single:
    """One submission, admission to settlement (and ``TAIL``), statement by statement."""

    statements: list[Statement]
    worker: Tally
    client: Tally
    seconds: float

    def worker_classes(self) -> list[tuple[str, int]]:
        return _classes(s for s in self.statements if s.source == "worker")

    def client_classes(self) -> list[tuple[str, int]]:
        return _classes(s for s in self.statements if s.source == "client")


def _classes(statements: Iterable[Statement]) -> list[tuple[str, int]]:
    counts: Counter[str] = Counter()
    for statement in statements:
        counts[label(statement.text)] += 1
    return list(counts.items())  # in order of first appearance


@dataclass
class Counted:
    side: str
    submissions: int
    idle_statements_per_s: float
    idle_round_trips_per_s: float
    idle_commits_per_s: float
    costs: dict[str, Cost] = field(default_factory=dict)
    singles: list[Single] = field(default_factory=list)

    def median_single(self) -> Single | None:
        if not self.singles:
            return None
        ordered = sorted(self.singles, key=lambda s: s.worker.statements)
        return ordered[len(ordered) // 2]


async def count(
    side: Side, base: str, workloads: Sequence[str], submissions: int, singles: int
) -> Counted:
    with proxied(base, "worker") as worker, proxied(base, "client") as client:
        async with Workers([side.worker_argv(through(base, worker.port), 0)], side.ready):
            quiet = IDLE if submissions >= 100 else IDLE / 4
            await asyncio.sleep(quiet / 2)  # its start-up statements are not the idle rate
            before = worker.snapshot()
            await asyncio.sleep(quiet)
            idle = worker.snapshot() - before
            counted = Counted(
                side.name,
                submissions,
                idle.statements / quiet,
                idle.round_trips / quiet,
                idle.commits / quiet,
            )
            async with side.admitter(through(base, client.port)) as admit:
                for workload in workloads:
                    prefix = f"count-{workload}-{uuid.uuid4().hex[:8]}"

                    async def backlog(workload: str = workload, prefix: str = prefix) -> None:
                        for n in range(submissions):
                            await admit(workload, f"{prefix}-{n}")

                    worker_before, client_before = worker.snapshot(), client.snapshot()
                    await gated(side, base, backlog)
                    client_after = client.snapshot()
                    await wait_settled(side, base, prefix, submissions)
                    await asyncio.sleep(TAIL)
                    counted.costs[workload] = Cost.of(
                        worker.snapshot() - worker_before, client_after - client_before, submissions
                    )
                with psycopg.connect(base, autocommit=True) as conn:
                    for _ in range(singles):
                        counted.singles.append(await _single(side, conn, worker, client, admit))
    return counted


async def _single(
    side: Side, conn: psycopg.Connection[Any], worker: Proxy, client: Proxy, admit: Admit
) -> Single:
    await asyncio.sleep(TAIL)
    name = f"single-{uuid.uuid4().hex[:8]}"
    worker_before, client_before = worker.snapshot(), client.snapshot()
    start = time.monotonic()
    with recording(worker, client) as statements:
        await admit(WORKLOAD, name)
        await wait_one(side, conn, WORKLOAD, name)
        await asyncio.sleep(TAIL)
    return Single(
        statements,
        worker.snapshot() - worker_before,
        client.snapshot() - client_before,
        time.monotonic() - start,
    )
