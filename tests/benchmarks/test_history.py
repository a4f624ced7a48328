"""``benchmarks/history.py`` runs at tiny sizes and ends with its goals (not judged there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks._table import split_goals

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


def test_a_tiny_run_prints_its_table_and_goals() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/history.py", "--records", "30", "60", "--turns", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "cold open + first turn" in done.stdout
    _, goals = split_goals(done.stdout)
    assert goals is not None
    assert [goal.met for goal in goals] == [None, None, None]
