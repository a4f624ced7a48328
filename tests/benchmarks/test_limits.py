"""``benchmarks/limits.py`` runs at a tiny size and prints its tables and goals (the shared
rate across 4 worker processes only where PostgreSQL is)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks._table import split_goals

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


def test_the_limits_benchmark_runs_and_states_its_goals(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/limits.py",
            *("--turns 5 --rounds 1 --queued 20 --claims 2 --rate 5 --per 0.5 --seconds 2").split(),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text, goals = split_goals(done.stdout)
    assert "CPU per turn" in text and "A claim of one head" in text
    assert goals is not None
    assert any("under 5% of a turn's CPU" in goal.goal for goal in goals)
    if os.environ.get("TETHER_TEST_POSTGRES_URL") or os.environ.get("CI"):
        assert "worker processes" in text
        assert [g.met for g in goals if "no window" in g.goal] == [True]


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
