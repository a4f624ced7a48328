"""``benchmarks/limits.py``'s counted child. The script's own run, at a tiny size, is the
benchmarks' quick run's (``tests/benchmarks/test_suite.py`` checks its tables and goals)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


def test_the_counted_child_runs_each_variant(tmp_path: Path) -> None:
    """What ``--instructions`` counts under callgrind runs on its own (each variant's turns
    on a fresh SQLite store): valgrind left out, so that the test needs none."""
    for variant in ("no budget, no limit", "rate on the model", "runs in flight on the agent"):
        done = subprocess.run(
            [sys.executable, "benchmarks/limits.py", "--count-child", str(tmp_path), variant, "3"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
