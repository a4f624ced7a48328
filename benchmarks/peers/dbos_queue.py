"""DBOS's served path on PostgreSQL: queue workers that drain what a client enqueues.

    python -m benchmarks.peers.dbos_queue URL SCHEMA EXECUTOR_ID

runs one worker (a process, as ``tether worker`` is): DBOS launched on the system database
``URL`` (schema ``SCHEMA``), listening on the queue ``bench``, which :func:`migrate` made
beforehand with its ``worker_concurrency`` and ``polling_interval_sec``. It prints
``ready`` once launched and runs until SIGTERM. The workflow is the fake model's conversation
of ``turns`` turns (``benchmarks/peers/_fake.py``): a ``@DBOS.step`` per model call and per
tool call, ``2 * turns + 1`` steps. The client side (:func:`enqueue`, :func:`completions`)
runs in the benchmark's process. Import only with the ``bench`` extra: it needs ``dbos``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from dbos import DBOS, DBOSClient, DBOSConfig
from psycopg import sql

from benchmarks._workloads import TURNS
from benchmarks.peers._fake import TEXT, reply, tool_result

if TYPE_CHECKING:
    from benchmarks._served import Admit

__all__ = (
    "APP_VERSION",
    "QUEUE",
    "WORKFLOW",
    "DbosSide",
    "client",
    "completions",
    "enqueue",
    "migrate",
)

QUEUE = "bench"
WORKFLOW = "served"
APP_VERSION = "bench"  # a worker dequeues only its own application version's workflows
APP_NAME = "tether-bench"


def _model(done: int, turns: int) -> dict[str, Any]:
    text, call = reply(done, turns)
    return {"text": text, "call": call}


def _tool(n: int) -> str:
    return tool_result(n)


# Decorated by call, not with ``@``: without the bench extra, dbos is untyped to mypy, and a
# decorator of unknown type would make the functions so too.
model_step = DBOS.step(name="model_step")(_model)
tool_step = DBOS.step(name="tool_step")(_tool)


def _served(turns: int, user: str) -> str:
    """``turns`` model steps that call the tool, each followed by the tool step, then the
    final model step: what Tether's agent does with the same fake model."""
    done = 0
    while True:
        answer = model_step(done, turns)
        if answer["call"] is None:
            return str(answer["text"])
        tool_step(int(answer["call"]))
        done += 1


served = DBOS.workflow(name=WORKFLOW)(_served)


def _sqlalchemy_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def migrate(url: str, schema: str, poll: float, concurrency: int) -> None:
    """Create DBOS's system tables in ``schema`` and the queue (once, before any worker
    launches: a worker's queue thread then finds the queue as it starts)."""
    logging.getLogger("dbos").setLevel(logging.ERROR)
    DBOS.migrate(_sqlalchemy_url(url), schema=schema)
    with client(url, schema) as made:
        made.register_queue(
            QUEUE,
            worker_concurrency=concurrency,
            polling_interval_sec=poll,
            application_name=APP_NAME,
        )


def drop(url: str, schema: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextlib.contextmanager
def client(url: str, schema: str) -> Iterator[DBOSClient]:
    logging.getLogger("dbos").setLevel(logging.ERROR)
    made = DBOSClient(
        system_database_url=_sqlalchemy_url(url),
        dbos_system_schema=schema,
        application_name=APP_NAME,
    )
    try:
        yield made
    finally:
        made.destroy()


def enqueue(made: DBOSClient, workflow_id: str, turns: int) -> None:
    """Admit one submission: a workflow row ENQUEUED on the queue, durable on return."""
    made.enqueue(
        {
            "queue_name": QUEUE,
            "workflow_name": WORKFLOW,
            "workflow_id": workflow_id,
            "app_version": APP_VERSION,
        },
        turns,
        TEXT,
    )


def completions(
    url: str, schema: str, prefix: str
) -> list[tuple[str, float, float | None, float | None]]:
    """Every workflow whose id starts with ``prefix``: (status, admitted, started, settled),
    times in seconds since the epoch (DBOS's own epoch-millisecond columns)."""
    query = sql.SQL(
        "SELECT status, created_at, started_at_epoch_ms, completed_at "
        "FROM {}.workflow_status WHERE workflow_uuid LIKE %s"
    ).format(sql.Identifier(schema))
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(query, (prefix + "%",)).fetchall()
    return [
        (
            str(status),
            created / 1000,
            None if started is None else started / 1000,
            None if done is None else done / 1000,
        )
        for status, created, started, done in rows
    ]


def count_done(conn: psycopg.Connection[Any], schema: str, prefix: str) -> int:
    query = sql.SQL(
        "SELECT count(*) FROM {}.workflow_status "
        "WHERE workflow_uuid LIKE %s AND status IN ('SUCCESS', 'ERROR')"
    ).format(sql.Identifier(schema))
    row = conn.execute(query, (prefix + "%",)).fetchone()
    return int(row[0]) if row else 0


class DbosSide:
    """DBOS queue workers (``benchmarks/peers/dbos_queue.py``): ``concurrency`` workflows at
    once a worker (Tether's ``max_concurrent_runs``), the queue polled every ``poll`` s."""

    name = "DBOS"
    ready = "ready"

    def __init__(self, base: str, schema: str, poll: float, concurrency: int) -> None:
        self.base, self.schema = base, schema
        self.poll, self.concurrency = poll, concurrency
        self.run = uuid.uuid4().hex[:6]

    async def migrate(self) -> None:
        await asyncio.to_thread(migrate, self.base, self.schema, self.poll, self.concurrency)

    def worker_argv(self, url: str, index: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "benchmarks.peers.dbos_queue",
            url,
            self.schema,
            f"bench-{self.run}-{index}",
        ]

    def gate(self) -> sql.Composed:
        return sql.SQL("LOCK TABLE {}.operation_outputs IN EXCLUSIVE MODE").format(
            sql.Identifier(self.schema)
        )

    @contextlib.asynccontextmanager
    async def admitter(self, url: str) -> AsyncIterator[Admit]:
        """``DBOSClient.enqueue`` (a synchronous call: made on the event loop's thread, as
        nothing else runs there meanwhile)."""
        with client(url, self.schema) as made:

            async def admit(workload: str, name: str) -> None:
                enqueue(made, name, TURNS[workload])

            yield admit

    def settled(self, conn: psycopg.Connection[Any], prefix: str) -> int:
        return count_done(conn, self.schema, prefix + "-")

    def one(
        self, conn: psycopg.Connection[Any], workload: str, name: str
    ) -> tuple[float, float, float] | None:
        query = sql.SQL(
            "SELECT status, created_at, started_at_epoch_ms, completed_at "
            "FROM {}.workflow_status WHERE workflow_uuid = %s AND status IN ('SUCCESS', 'ERROR')"
        ).format(sql.Identifier(self.schema))
        row = conn.execute(query, (name,)).fetchone()
        if row is None:
            return None
        status, created, started, settled = row
        if status != "SUCCESS" or started is None or settled is None:
            raise AssertionError(f"a DBOS workflow ended {status}")
        return created / 1000, started / 1000, settled / 1000

    def completions(self, url: str, prefix: str) -> list[tuple[float, float, float]]:
        out = []
        for status, created, started, settled in completions(self.base, self.schema, prefix + "-"):
            if status != "SUCCESS" or started is None or settled is None:
                raise AssertionError(f"a DBOS workflow ended {status}")
            out.append((created, started, settled))
        return out

    def drop(self) -> None:
        drop(self.base, self.schema)


def _config(url: str, schema: str, executor_id: str) -> DBOSConfig:
    return {
        "name": APP_NAME,
        "system_database_url": _sqlalchemy_url(url),
        "dbos_system_schema": schema,
        "log_level": "ERROR",
        "console_log_level": "ERROR",
        "application_version": APP_VERSION,
        "executor_id": executor_id,
        "run_migrations": False,  # migrated once by the benchmark: no race between workers
    }


def main(argv: Sequence[str]) -> None:
    url, schema, executor_id = argv[0], argv[1], argv[2]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    logging.getLogger("dbos").setLevel(logging.ERROR)
    DBOS(config=_config(url, schema, executor_id))
    DBOS.launch()  # the queue is registered (``migrate``): its settings are the database's
    # Ready once the queue's own thread polls it (DBOS's queue thread starts it within 1 s).
    while not any(t.name == f"queue-worker-{QUEUE}" for t in threading.enumerate()):
        if stop.wait(0.02):
            break
    print("ready", flush=True)
    stop.wait()
    DBOS.destroy(destroy_registry=False)
    sys.stdout.flush()
    os._exit(0)  # DBOS's daemon threads need not be waited for


if __name__ == "__main__":
    main(sys.argv[1:])
