"""``benchmarks/pg_claim.py`` measures the PostgreSQL claim: its child run admits a backlog,
explains and times claims, and reports the index the heads are read from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ..postgres import POSTGRES_URL

pytestmark = [pytest.mark.process, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mode", ["plain", "priorities"])
def test_the_measured_run_reads_the_heads_in_claim_order_from_the_index(mode: str) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/pg_claim.py", "--child", POSTGRES_URL, "40", "5", mode],
        cwd=ROOT,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["x1"]["indexes"][0] == "submissions_queued_by_rank"
    assert measured["x1"]["buffers"] > 0 and measured["ms"]["p50"] > 0
