"""The served path on PostgreSQL, Tether beside DBOS: worker processes drain a backlog.

Used by ``benchmarks/postgres.py``. Each side runs as its users run it, one process per worker:
``tether worker --app benchmarks._served_app:agents`` for Tether, DBOS queue workers
(``benchmarks/peers/dbos_queue.py``) for DBOS, both on the same database (a schema each), one
side at a time so that neither's idle polling lands in the other's figures. Per worker count N:

1. start N workers and wait until each says it is ready;
2. per workload, hold a gate (``LOCK TABLE ... IN EXCLUSIVE MODE`` on the one table a claim
   writes and an admission does not: Tether's ``attempts``, DBOS's ``operation_outputs``), admit
   the backlog (Tether: ``Runtime.dispatch`` from a runtime that runs nothing, one session a
   submission; DBOS: ``DBOSClient.enqueue``), then open the gate: every worker starts at once,
   none before its backlog is whole;
3. read every submission's admission, claim and settlement times from the database (Tether's
   ``submissions`` and ``attempts`` rows, DBOS's ``workflow_status`` epoch-millisecond columns):
   settled/s between the 10th and 90th percentile settlements, and each one's wait from the
   gate's opening (or its admission, if later) to its settlement;
4. then ``samples`` submissions one at a time, each admitted once the previous settled, with
   the N workers idle: admission → settled, from the same columns;
5. stop the workers (SIGTERM).

Counting (``count``) runs the same steps with the workers connected through
``benchmarks/_pgwire.py``'s proxy (so nothing is timed there): statements, round trips and
commits a submission, and the statements of single submissions from claim to settlement.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg import sql

from benchmarks._cpu import CoresBusy, CpuSample
from benchmarks._measure import percentile
from benchmarks.peers._fake import TEXT

__all__ = (
    "Admit",
    "Drain",
    "Side",
    "TetherSide",
    "Workers",
    "dbos_available",
    "drain",
    "rate_between",
    "summary",
    "wait_one",
    "wait_settled",
)

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 120.0
DRAIN_TIMEOUT = 900.0


class Admit(Protocol):
    async def __call__(self, workload: str, name: str) -> None: ...


class Side(Protocol):
    name: str
    ready: str
    """What a worker prints on stdout once it is ready."""

    async def migrate(self) -> None: ...

    def drop(self) -> None: ...

    def worker_argv(self, url: str, index: int) -> list[str]:
        """One worker's command line; ``url``: the database (perhaps through a proxy)."""
        ...

    def gate(self) -> sql.Composed: ...

    def admitter(self, url: str) -> contextlib.AbstractAsyncContextManager[Admit]:
        """A client admitting submissions: ``await admit(workload, name)``."""
        ...

    def settled(self, conn: psycopg.Connection[Any], prefix: str) -> int: ...

    def one(
        self, conn: psycopg.Connection[Any], workload: str, name: str
    ) -> tuple[float, float, float] | None:
        """(admitted, claimed, settled) of the submission ``name``, ``None`` until it
        settles: one lookup by a unique index (polled every few milliseconds)."""
        ...

    def completions(self, url: str, prefix: str) -> list[tuple[float, float, float]]:
        """(admitted, claimed, settled) of every submission of ``prefix``, in epoch seconds;
        raises if one did not succeed."""
        ...


# --- Tether ---------------------------------------------------------------------------------


class TetherSide:
    name = "Tether"
    ready = "tether worker running"

    def __init__(self, base: str, schema: str) -> None:
        self.base, self.schema = base, schema

    async def migrate(self) -> None:
        from tether.store.postgres import PostgresStore

        async with await PostgresStore.open(self.store_url(self.base)):
            pass

    def drop(self) -> None:
        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )

    def worker_argv(self, url: str, index: int) -> list[str]:
        tether = Path(sys.executable).with_name("tether")
        command = [str(tether)] if tether.exists() else [sys.executable, "-m", "tether.cli"]
        store = self.store_url(url)
        return [*command, "worker", "--store", store, "--app", "benchmarks._served_app:agents"]

    def store_url(self, base: str) -> str:
        return f"{base}{'&' if '?' in base else '?'}schema={self.schema}"

    def gate(self) -> sql.Composed:
        return sql.SQL("LOCK TABLE {}.attempts IN EXCLUSIVE MODE").format(
            sql.Identifier(self.schema)
        )

    @contextlib.asynccontextmanager
    async def admitter(self, url: str) -> AsyncIterator[Admit]:
        """``Runtime.dispatch`` from a runtime that runs nothing (an API node's), each
        submission in a session of its own (``name`` its instance)."""
        from benchmarks._served_app import agents
        from tether.engine import Runtime
        from tether.store.postgres import PostgresStore

        async with await PostgresStore.open(self.store_url(url)) as store:
            runtime = Runtime(agents(), store)
            await runtime.start(worker=False)
            try:

                async def dispatch(workload: str, name: str) -> None:
                    await runtime.dispatch(workload, name, TEXT)

                yield dispatch
            finally:
                await runtime.close()

    def settled(self, conn: psycopg.Connection[Any], prefix: str) -> int:
        query = sql.SQL(
            "SELECT count(*) FROM {}.submissions WHERE instance LIKE %s AND status = 'settled'"
        ).format(sql.Identifier(self.schema))
        row = conn.execute(query, (prefix + "-%",)).fetchone()
        return int(row[0]) if row else 0

    def one(
        self, conn: psycopg.Connection[Any], workload: str, name: str
    ) -> tuple[float, float, float] | None:
        query = sql.SQL(
            "SELECT s.created_at, (SELECT min(a.started_at) FROM {schema}.attempts a "
            "WHERE a.submission_id = s.id), s.settled_at, s.settlement "
            "FROM {schema}.submissions s WHERE s.agent = %s AND s.instance = %s "
            "AND s.status = 'settled'"
        ).format(schema=sql.Identifier(self.schema))
        row = conn.execute(query, (workload, name)).fetchone()
        return None if row is None else _succeeded(*row)

    def completions(self, url: str, prefix: str) -> list[tuple[float, float, float]]:
        query = sql.SQL(
            "SELECT s.created_at, (SELECT min(a.started_at) FROM {schema}.attempts a "
            "WHERE a.submission_id = s.id), s.settled_at, s.settlement "
            "FROM {schema}.submissions s WHERE s.instance LIKE %s"
        ).format(schema=sql.Identifier(self.schema))
        with psycopg.connect(self.base, autocommit=True) as conn:
            rows = conn.execute(query, (prefix + "-%",)).fetchall()
        return [_succeeded(*row) for row in rows]


def _succeeded(
    created: datetime, started: datetime, settled: datetime | None, settlement: bytes | None
) -> tuple[float, float, float]:
    status = json.loads(bytes(settlement)).get("status") if settlement else None
    if status != "succeeded" or settled is None:
        raise AssertionError(f"a Tether submission ended {status}: {settlement!r}")
    return created.timestamp(), started.timestamp(), settled.timestamp()


# --- DBOS -----------------------------------------------------------------------------------


def dbos_available() -> bool:
    try:
        import dbos  # noqa: F401
    except ImportError:
        return False
    return True


# --- worker processes -----------------------------------------------------------------------


class Workers:
    """``argvs`` as processes (cwd: the repository), started together; ``ready`` awaited."""

    def __init__(self, argvs: Sequence[list[str]], ready: str) -> None:
        self.argvs, self.ready = argvs, ready
        self.processes: list[asyncio.subprocess.Process] = []
        self.logs: list[Any] = []
        self._drains: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Workers:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
        try:
            for argv in self.argvs:
                log = tempfile.TemporaryFile(mode="w+")
                self.logs.append(log)
                self.processes.append(
                    await asyncio.create_subprocess_exec(
                        *argv, cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=log
                    )
                )
            await asyncio.wait_for(
                asyncio.gather(*(self._await_ready(p) for p in self.processes)), READY_TIMEOUT
            )
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _await_ready(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        while line := await process.stdout.readline():
            if line.decode().startswith(self.ready):
                # Whatever it prints next is read and dropped: a full pipe would stop it.
                self._drains.append(asyncio.create_task(_drop(process.stdout)))
                return
        raise RuntimeError(f"a worker exited before it was ready:\n{self.errors()}")

    def errors(self) -> str:
        texts = []
        for log in self.logs:
            log.seek(0)
            texts.append(log.read()[-3000:])
        return "\n".join(texts)

    async def __aexit__(self, *exc: object) -> None:
        for process in self.processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
        for task in self._drains:
            task.cancel()
        for log in self.logs:
            log.close()


async def _drop(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


# --- one drain --------------------------------------------------------------------------------


@dataclass
class Drain:
    side: str
    workload: str
    workers: int
    submissions: int
    admissions_per_s: float
    settled_per_s: float
    waits_ms: list[float]
    """Gate opening (or admission, if later) → settled, every submission of the backlog."""
    runs_ms: list[float]
    """Claim (or the gate's opening, for a claim the gate held) → settled."""
    latency_ms: list[float] = field(default_factory=list)
    """Admission → settled, one submission at a time with the workers idle."""
    cores: CoresBusy | None = None
    """Cores the backlog kept busy (workers / PostgreSQL / the machine), gate to drained."""


def rate_between(settled: Sequence[float], low: float = 0.1, high: float = 0.9) -> float:
    """Settlements per second between the ``low`` and ``high`` quantile settlements."""
    ordered = sorted(settled)
    if len(ordered) < 3:
        return float("nan")
    first, last = int(low * (len(ordered) - 1)), int(high * (len(ordered) - 1))
    span = ordered[last] - ordered[first]
    return (last - first) / span if span > 0 else float("inf")


async def wait_settled(side: Side, url: str, prefix: str, count: int) -> None:
    """Until ``count`` submissions of ``prefix`` settled (a count every 50 ms: its scan is
    the benchmark's own load on the server, kept small)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT
    with psycopg.connect(url, autocommit=True) as conn:
        while side.settled(conn, prefix) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{side.name}: {prefix} did not drain")
            await asyncio.sleep(0.05)


async def wait_one(
    side: Side, conn: psycopg.Connection[Any], workload: str, name: str
) -> tuple[float, float, float]:
    """The submission ``name``'s times once it settled (looked up every 5 ms)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while (found := side.one(conn, workload, name)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{side.name}: {name} did not settle")
        await asyncio.sleep(0.005)
    return found


async def gated(side: Side, url: str, admit: Callable[[], Awaitable[None]]) -> float:
    """Run ``admit()`` with the gate shut; returns when it opened (epoch seconds)."""
    async with await psycopg.AsyncConnection.connect(url) as gate:
        async with gate.transaction():
            await gate.execute(side.gate())
            await admit()
            await asyncio.sleep(0.05)  # the workers' claims reach the gate
        return time.time()


async def drain(
    side: Side,
    url: str,
    admit: Admit,
    workload: str,
    workers: int,
    submissions: int,
    samples: int,
    worker_pids: Sequence[int] = (),
) -> Drain:
    """One backlog of ``submissions`` through the running workers (``worker_pids``: their
    CPU time is measured), then ``samples`` alone."""
    prefix = f"{workload}-n{workers}-{uuid.uuid4().hex[:8]}"
    took: list[float] = []

    async def backlog() -> None:
        start = time.perf_counter()
        for n in range(submissions):
            await admit(workload, f"{prefix}-{n}")
        took.append(time.perf_counter() - start)

    opened = await gated(side, url, backlog)
    before = CpuSample.now(worker_pids)
    await wait_settled(side, url, prefix, submissions)
    cores = CoresBusy.between(before, CpuSample.now(worker_pids))
    rows = side.completions(url, prefix)
    result = Drain(
        side.name,
        workload,
        workers,
        submissions,
        submissions / took[0],
        rate_between([settled for _, _, settled in rows]),
        [(settled - max(created, opened)) * 1000 for created, _, settled in rows],
        [(settled - max(started, opened)) * 1000 for _, started, settled in rows],
        cores=cores,
    )
    with psycopg.connect(url, autocommit=True) as conn:
        for n in range(samples):
            name = f"{prefix}-l{n}"
            await admit(workload, name)
            created, _, settled = await wait_one(side, conn, workload, name)
            result.latency_ms.append((settled - created) * 1000)
    return result


def summary(values: Sequence[float]) -> tuple[float, float]:
    """p50 and p99."""
    ordered = list(values)
    return percentile(ordered, 0.5), percentile(ordered, 0.99)
