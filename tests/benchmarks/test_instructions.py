"""``benchmarks/instructions.py`` counts the suite's turn workload: the workload it counts
runs (valgrind itself is left to the script: a counted run takes minutes)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


def test_the_counted_workload_runs_its_conversations(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "benchmarks/instructions.py", "--child", str(tmp_path), "3", "2"],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    conn = sqlite3.connect(tmp_path / "tether.db")
    try:
        (conversations,) = conn.execute("SELECT count(*) FROM conversations").fetchone()
    finally:
        conn.close()
    assert conversations == 3  # the warm-up and the two counted
