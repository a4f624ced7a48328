"""``benchmarks/store_claim.py`` counts claims with and without ``serves``: the workload it
counts runs and claims what it says (valgrind itself is left to the script)."""

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
        [sys.executable, "benchmarks/store_claim.py", "--child", str(tmp_path), "3", mode],
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
