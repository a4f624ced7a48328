"""What every benchmark shares: the physical floor, percentiles, a scratch directory of its
own, and where PostgreSQL is."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tether.store._sqlite_schema import PAGE_SIZE, WAL_AUTOCHECKPOINT_PAGES

__all__ = (
    "LOCAL_POSTGRES",
    "own_database",
    "percentile",
    "postgres_answers",
    "raw_commit_ms",
    "scratch",
    "told_postgres_url",
)

LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
"""The local server's maintenance database: where a benchmark that is told no database
creates one of its own (and drops it). Nothing is written to it."""


def told_postgres_url() -> str | None:
    """The database the environment says the PostgreSQL benchmarks may make their schemas in
    (``TETHER_BENCH_POSTGRES_URL``, else ``TETHER_TEST_POSTGRES_URL``, as the tests find
    theirs), or ``None``: then they create a database of their own (``own_database``)."""
    return (
        os.environ.get("TETHER_BENCH_POSTGRES_URL")
        or os.environ.get("TETHER_TEST_POSTGRES_URL")
        or None
    )


def postgres_answers(url: str) -> bool:
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=2).close()
    except Exception:
        return False
    return True


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextlib.contextmanager
def own_database(server: str = LOCAL_POSTGRES) -> Iterator[str]:
    """A new database on ``server``'s PostgreSQL (``server``: a URL of a database there to
    connect to), dropped on the way out; yields its URL."""
    import psycopg
    from psycopg import sql

    name = f"tether_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield _with_database(server, name)
    finally:
        with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _filesystem(path: Path) -> str:
    """The type of the filesystem ``path`` is on (``""`` if unknown)."""
    best, kind = "", ""
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            mount = fields[1].replace("\\040", " ")
            if str(path).startswith(mount.rstrip("/") + "/") or str(path) == mount:
                if len(mount) >= len(best):
                    best, kind = mount, fields[2]
    except (OSError, IndexError):
        pass
    return kind


@contextlib.contextmanager
def scratch(prefix: str = "tether-bench-") -> Iterator[Path]:
    """A temporary directory for a benchmark's stores and files, removed on the way out: in
    the system's temporary directory (``TMPDIR`` to choose another), never the working one.
    On a tmpfs, where an fsync costs nothing, it says so: durable figures are then no floor's."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        path = Path(tmp).resolve()
        if _filesystem(path) == "tmpfs":
            print(
                f"note: {path} is on a tmpfs (fsync costs nothing there); set TMPDIR to a "
                "directory on a disk to measure durable writes",
                file=sys.stderr,
            )
        yield path


def raw_commit_ms(path: Path, samples: int = 200) -> float:
    """The physical floor: one 300-byte INSERT committed by raw sqlite3, WAL + synchronous=FULL,
    with the page size and WAL checkpoint interval of Tether's store, timed once the WAL has
    wrapped (a commit that overwrites WAL space is fsynced faster than one that grows the file,
    so timing only the first commits of a new file would put the floor above the disk's)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
    conn.execute("CREATE TABLE IF NOT EXISTS t (v BLOB)")
    times = []
    for n in range(WAL_AUTOCHECKPOINT_PAGES + samples):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?)", (b"x" * 300,))
        conn.execute("COMMIT")
        if n >= WAL_AUTOCHECKPOINT_PAGES:
            times.append(time.perf_counter() - start)
    conn.close()
    return statistics.median(times) * 1000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
