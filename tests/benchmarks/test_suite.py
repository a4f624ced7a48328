"""``python -m benchmarks --quick`` runs end to end, with and without the ``bench`` extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A quick run takes 10-60 s on an idle machine, several times that on a loaded one (it runs
# every benchmark script, PostgreSQL worker processes included): its own bound, well past that.
RUN_SECONDS = 540

# Importing a module mapped to None in sys.modules raises ImportError: as if not installed.
WITHOUT_EXTRA = """
import sys
sys.modules.update(dict.fromkeys(("langgraph", "dbos", "matplotlib"), None))
from benchmarks.__main__ import main
main(sys.argv[1:])
"""


def _run(args: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _peers_installed() -> bool:
    try:
        import dbos  # noqa: F401
        import langgraph  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_quick_run_writes_tables_and_plots(tmp_path: Path) -> None:
    out = _run(["-m", "benchmarks", "--quick", "--out", str(tmp_path)])
    [report] = tmp_path.glob("*-quick.md")
    text = report.read_text()
    assert "## Side by side" in text and "## Goals" in text
    assert "overhead per turn, T=5" in text and "cold resume" in text
    for script in ("store_append.py", "replay.py", "engine.py", "sse.py", "postgres.py"):
        assert f"### benchmarks/{script}" in text
    assert "FAILED" not in text, text
    assert "overhead per turn" in out
    if _peers_installed():
        assert "| LangGraph | Tether/LangGraph | DBOS | Tether/DBOS |" in text
        assert len(list(tmp_path.glob("*.png"))) == 3
    else:
        assert "skipped: install tether[bench]" in text


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_quick_run_without_the_bench_extra(tmp_path: Path) -> None:
    out = _run(["-c", WITHOUT_EXTRA, "--quick", "--no-scripts", "--out", str(tmp_path)])
    [report] = tmp_path.glob("*-quick.md")
    text = report.read_text()
    assert "**LangGraph**: skipped: install tether[bench]" in text
    assert "**DBOS**: skipped: install tether[bench]" in text
    assert "Tether/LangGraph" not in text
    assert not list(tmp_path.glob("*.png"))  # no matplotlib either
    assert "overhead per turn" in out
