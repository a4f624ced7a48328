"""``python -m benchmarks --quick`` runs end to end, with and without the ``bench`` extra; its
results hold one table of every goal, the scripts' too; it writes nothing where it is run."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from benchmarks._table import Goal, split_goals

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]
# A quick run takes 10-60 s on an idle machine, several times that on a loaded one (it runs
# every benchmark script, PostgreSQL worker processes included): its own bound, well past that.
RUN_SECONDS = 540
SCRIPTS = ("store_append.py", "replay.py", "engine.py", "sse.py", "postgres.py", "limits.py")
RATE_GOAL = "no window of the rate's length over it (by grant)"

# Importing a module mapped to None in sys.modules raises ImportError: as if not installed.
WITHOUT_EXTRA = """
import sys
sys.modules.update(dict.fromkeys(("langgraph", "dbos", "matplotlib"), None))
from benchmarks.__main__ import main
main(sys.argv[1:])
"""


def _run(args: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _peers_installed() -> bool:
    try:
        import dbos  # noqa: F401
        import langgraph.checkpoint.sqlite  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class QuickRun:
    stdout: str
    report: str
    out: Path
    cwd: Path
    tmp: Path


def _quick_run(tmp_path: Path) -> QuickRun:
    """A quick run started in an empty directory, with a temporary directory of its own
    (``TMPDIR``) and its results written elsewhere."""
    cwd, tmp, out = (tmp_path / name for name in ("cwd", "tmp", "out"))
    for directory in (cwd, tmp, out):
        directory.mkdir()
    pythonpath = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": pythonpath}
    stdout = _run(["-m", "benchmarks", "--quick", "--out", str(out)], cwd=cwd, env=env)
    [report] = out.glob("*-quick.md")
    return QuickRun(stdout, report.read_text(), out, cwd, tmp)


def _goals_table(report: str) -> list[tuple[Goal, str]]:
    """The results file's goals table: each goal with where it is from (its last column)."""
    section = report.split("\n## Goals\n", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert table[0] == "| goal | measured | met | from |", table[0]
    _, goals = split_goals("## Goals\n" + "\n".join(table))
    rows = table[2:]
    assert goals is not None and len(goals) == len(rows), (goals, rows)
    return [(goal, row.rsplit("|", 2)[-2].strip()) for goal, row in zip(goals, rows, strict=True)]


@pytest.mark.timeout(RUN_SECONDS + 60)
def test_a_quick_run(tmp_path: Path) -> None:
    """One quick run (a minute of CPU), and what it must do: each check below on it. One
    test, not one each sharing a module fixture: under xdist each worker that drew one of
    them would run the fixture, the quick run, again."""
    quick_run = _quick_run(tmp_path)
    _writes_tables_and_plots(quick_run)
    _reports_every_goal_in_one_table(quick_run)
    _runs_limits_and_judges_its_shared_rate(quick_run)
    _leaves_no_files_behind(quick_run)


def _writes_tables_and_plots(quick_run: QuickRun) -> None:
    text, out = quick_run.report, quick_run.stdout
    assert "## Side by side" in text and "## Goals" in text
    assert "overhead per turn, T=5" in text and "cold resume and first turn" in text
    for script in SCRIPTS:
        assert f"### benchmarks/{script}" in text
    assert "FAILED" not in text, text
    assert "overhead per turn" in out
    if _peers_installed():
        assert "| LangGraph | Tether/LangGraph | DBOS | Tether/DBOS |" in text
        assert len(list(quick_run.out.glob("*.png"))) == 3
    else:
        assert "skipped: install tether[bench]" in text


def _reports_every_goal_in_one_table(quick_run: QuickRun) -> None:
    text = quick_run.report
    assert text.count("## Goals") == 1  # the scripts' own tables are gathered into it
    goals = _goals_table(text)
    texts = {goal.goal: source for goal, source in goals}
    # The suite's own goals, and the scripts' (those the headline table used to leave out too).
    assert texts["engine admission → settled p50 ≤ 2 ms"] == "benchmarks/engine.py"
    assert any(g.startswith("engine agent turn") for g in texts)
    assert any(g.startswith("store append, 1 record per commit") for g in texts)
    assert texts["replay ≤ 3x the read and decode of its log"] == "benchmarks/replay.py"
    assert any(g.startswith("cold resume of a") for g in texts)
    assert any(g.startswith("overhead/turn ≤ 0.35x LangGraph") for g in texts)  # even if skipped
    postgres = [g for g, source in texts.items() if source == "benchmarks/postgres.py"]
    assert postgres, texts
    sources = {source for _, source in goals}
    assert sources >= {"python -m benchmarks", *(f"benchmarks/{s}" for s in SCRIPTS[:3])}
    # A quick run is too small to judge any of them but one: a window of the shared rate over
    # the rate is a bug at any size.
    assert all(goal.met is None or goal.goal == RATE_GOAL for goal, _ in goals), goals
    # The printed summary lists every goal too.
    for goal, _ in goals:
        assert goal.goal in quick_run.stdout
    assert f"Goals: {len(goals)}," in quick_run.stdout


def _runs_limits_and_judges_its_shared_rate(quick_run: QuickRun) -> None:
    """``benchmarks/limits.py``'s tables and goals, the shared rate across 4 worker processes
    only where PostgreSQL is (always under CI); no window of the rate's length over it."""
    text = quick_run.report.split("### benchmarks/limits.py", 1)[1].split("\n### ", 1)[0]
    assert "CPU per turn" in text and "A claim of one head" in text
    goals = {goal.goal: goal for goal, source in _goals_table(quick_run.report)}
    assert any("under 5% of a turn's CPU" in goal for goal in goals), goals
    if os.environ.get("TETHER_TEST_POSTGRES_URL") or os.environ.get("CI"):
        assert "worker processes" in text
        assert goals[RATE_GOAL].met is True, goals[RATE_GOAL]


def _leaves_no_files_behind(quick_run: QuickRun) -> None:
    assert not list(quick_run.cwd.iterdir())  # nothing in the working directory
    assert not list(quick_run.tmp.iterdir())  # its temporary directories are removed
    assert {p.suffix for p in quick_run.out.iterdir()} <= {".md", ".png"}


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
