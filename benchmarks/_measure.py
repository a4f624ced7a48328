"""Measurements every benchmark shares: the physical floor, percentiles, where PostgreSQL is."""

from __future__ import annotations

import os
import sqlite3
import statistics
import time
from pathlib import Path

from tether.store._sqlite_schema import PAGE_SIZE, WAL_AUTOCHECKPOINT_PAGES

__all__ = ("POSTGRES_URL", "percentile", "raw_commit_ms")

POSTGRES_URL = (
    os.environ.get("TETHER_BENCH_POSTGRES_URL")
    or os.environ.get("TETHER_TEST_POSTGRES_URL")
    or "postgresql://postgres@127.0.0.1:5432/test"
)
"""Where the PostgreSQL benchmarks make their schemas, as the tests find theirs."""


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
