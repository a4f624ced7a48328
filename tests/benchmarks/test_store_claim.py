"""``benchmarks/store_claim.py`` counts claims with and without ``serves``, and with mixed
priorities: the workload it counts runs and claims what it says (valgrind itself is left to
the script)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("mode", "version"), [("plain", None), ("versioned", "v1")])
def test_the_counted_workload_claims_its_heads(
    tmp_path: Path, mode: str, version: str | None
) -> None:
    subprocess.run(
        [sys.executable, "benchmarks/store_claim.py", "--child", str(tmp_path), "3", mode, "20"],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    conn = sqlite3.connect(tmp_path / "tether.db")
    try:
        rows = conn.execute("SELECT version FROM submissions WHERE status = 'running'").fetchall()
    finally:
        conn.close()
    assert rows == [(version,)] * 3


def test_the_prioritized_workload_claims_the_highest_first(tmp_path: Path) -> None:
    child = ["--child", str(tmp_path), "3", "priorities", "20"]
    subprocess.run(
        [sys.executable, "benchmarks/store_claim.py", *child],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    conn = sqlite3.connect(tmp_path / "tether.db")
    try:
        rows = conn.execute(
            "SELECT id, priority FROM submissions WHERE status = 'running' ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    # Sessions 0..19 at priorities n % 11 - 5: 5 is session 10's, 4 session 9's, 3 sessions
    # 8's and 19's (the earlier admitted first).
    assert rows == [("sub-00008", 3), ("sub-00009", 4), ("sub-00010", 5)]
