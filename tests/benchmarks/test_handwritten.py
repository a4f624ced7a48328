"""``benchmarks/handwritten.py`` runs, and every row says both sides gave the same output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_each_comparison_runs_and_agrees() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/handwritten.py", "--calls", "20", "--repeats", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    rows = [
        line for line in done.stdout.splitlines() if line.startswith(("a ULID", "canon", "SSE"))
    ]
    assert len(rows) == 5, done.stdout
    assert "DIFFERENT" not in done.stdout, done.stdout
