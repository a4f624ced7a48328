"""``benchmarks/usage.py`` counts the aggregate's instructions a model call: the workload it
counts runs, and in a tenant's conversation adds every call to the tenant's day (valgrind
itself is left to the script: a counted run takes minutes)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("tenant", "rows"), [("acme", [(53,)]), ("-", [(None,)])])
def test_the_counted_workload_appends_its_calls(
    tmp_path: Path, tenant: str, rows: list[tuple[int]]
) -> None:
    subprocess.run(
        [sys.executable, "benchmarks/usage.py", "--child", str(tmp_path), tenant, "3"],
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    conn = sqlite3.connect(tmp_path / "tether.db")
    try:
        assert conn.execute("SELECT sum(model_calls) FROM tenant_usage").fetchall() == rows
    finally:
        conn.close()
