"""``benchmarks/soak.py`` keeps running: a real ``tether serve`` driven over HTTP at a tiny size
(the one benchmark script that ``python -m benchmarks --quick`` does not run; the sizes are too
small to judge its goal)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARGS = "--submissions 40 --sessions 4 --concurrency 2 --every 20 --baseline 20".split()


def test_the_soak_runs_to_its_end(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), *ARGS],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RSS of the tether serve process as submissions settle" in done.stdout
    assert "RSS after 40 submissions" in done.stdout  # every submission settled
    assert "| n/a |" in done.stdout  # a goal too small to judge, not a verdict
