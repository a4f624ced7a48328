"""The whole suite: Tether beside LangGraph and DBOS on the same fake-model workload, the
physical floor measured in the same run, then every existing benchmark script, whose goals
tables (``benchmarks/_table.py``) it gathers with its own into one table of every goal.

Everything it writes but its results goes to a temporary directory of its own, removed at the
end; the scripts run there too. Used by ``python -m benchmarks``; see
``benchmarks/__main__.py`` for the options.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks._measure import (
    LOCAL_POSTGRES,
    own_database,
    percentile,
    postgres_answers,
    raw_commit_ms,
    scratch,
    told_postgres_url,
)
from benchmarks._plots import plot_lines
from benchmarks._table import Goal, goals_table, judged, split_goals
from benchmarks.peers import langgraph_side, tether_side
from benchmarks.peers._fake import TurnsResult, raw_turn_ms
from benchmarks.peers.resume import in_fresh_process

__all__ = ("Sizes", "run")

ROOT = Path(__file__).resolve().parent.parent
SKIPPED = "skipped: install tether[bench]"
TETHER, LANGGRAPH, DBOS = "Tether", "LangGraph", "DBOS"
THREADED = "Tether (writer thread)"
SUITE = "python -m benchmarks"
RECORDS_PER_TURN = 4  # model_called, assistant_message_completed, tool_called, tool_outcome


@dataclass
class Sizes:
    turns: Sequence[int]
    reps: Callable[[int], int]
    samples: int
    resume: Sequence[int]  # log lengths, in Tether records
    resume_runs: int
    scripts: dict[str, list[str]]
    """Each script run, with its arguments; its output's goals table is gathered with the
    suite's own (any script's: one printing none adds none)."""
    rounds: int = 1  # interleaved rounds of conversations; the median round counts
    judged: bool = True  # False: sizes too small to judge the suite's own goals


FULL = Sizes(
    turns=(10, 100, 500),
    # Conversations per T: enough at T=10 that its records fill as many pages as T=500's,
    # or the file's page-sized growth, not the records, decides its bytes per record; and
    # that a round of Tether's lasts half a second, not a burst a neighbour's load can fill.
    reps=lambda turns: 50 if turns <= 10 else 3 if turns <= 100 else 1,
    samples=100,
    resume=(100, 1_000, 10_000),
    resume_runs=5,
    rounds=5,
    scripts={
        "store_append.py": "--rounds 3".split(),
        "replay.py": "--records 10000 --rounds 3".split(),
        "engine.py": (
            "--samples 100 --turns 10 100 --sessions 1 10 --tp-turns 10 --tool-rounds 10 100"
        ).split(),
        "sse.py": [],
        "postgres.py": "--submissions 1000 --samples 100".split(),
        "http.py": [],
        "scale.py": [],
        "limits.py": [],
    },
)
QUICK = Sizes(
    turns=(2, 5),
    reps=lambda turns: 1,
    samples=5,
    resume=(100,),
    resume_runs=1,
    judged=False,
    scripts={  # each script at a tiny size: tests/benchmarks runs them so on every CI run
        "store_append.py": "--rounds 1 --records 50 --per-writer 10 --read-records 500".split(),
        "replay.py": "--rounds 1 --records 500".split(),
        "engine.py": "--samples 10 --turns 5 --sessions 1 4 --tp-turns 2 --tool-rounds 3".split(),
        "sse.py": "--records 500 --fanout-records 50 --subscribers 5 --appends 10".split(),
        "postgres.py": (
            "--submissions 20 --samples 5 --workers 1 --count-submissions 5 --singles 1"
        ).split(),
        "http.py": "--clients 1 4 --seconds 0.3 --warmup 0.1".split(),
        "scale.py": "--sizes 10 100 --submissions 5 --rounds 1 --sessions 2".split(),
        # Four windows of the shared rate: long enough to judge that none is over it, which
        # is a bug at any size (tests/benchmarks/test_suite.py checks it on this run).
        "limits.py": (
            "--turns 5 --rounds 1 --queued 20 --claims 2 --rate 5 --per 0.5 --seconds 2"
        ).split(),
    },
)


@dataclass
class Results:
    floor_ms: float = 0.0
    raw_turn_ms: float = 0.0
    turns: dict[str, dict[int, TurnsResult]] = field(default_factory=dict)
    tether_threaded: dict[int, TurnsResult] = field(default_factory=dict)
    """Tether's turns with ``inline_commits=False``: every commit through the writer thread."""
    latency: dict[str, list[float]] = field(default_factory=dict)
    resume: dict[str, dict[int, tuple[float, int]]] = field(default_factory=dict)
    resume_bytes: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Tether's resume logs: bytes on disk and bytes of the log's snapshot, by log length."""
    skipped: dict[str, str] = field(default_factory=dict)
    scripts: dict[str, str] = field(default_factory=dict)
    """Each script's output, less its goals table (in ``script_goals``)."""
    script_goals: dict[str, list[Goal]] = field(default_factory=dict)
    durability: dict[str, str] = field(default_factory=dict)
    judged: bool = True  # False: the suite's own goals are not judged (a quick run)


def _dbos() -> Any:
    """The DBOS side module, or ``None`` without the ``bench`` extra."""
    try:
        from benchmarks.peers import dbos_side
    except ImportError:
        return None
    return dbos_side


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _measure_peers(sizes: Sizes, tmp: Path, results: Results) -> None:
    results.floor_ms = raw_commit_ms(tmp / "floor.db")
    results.raw_turn_ms = raw_turn_ms()
    _log(f"floor: raw sqlite3 commit {results.floor_ms:.3f} ms")
    dbos_side = _dbos()
    with contextlib.ExitStack() as stack:
        runners: dict[str, TurnsRunner] = {
            TETHER: tether_side.run_turns,
            THREADED: functools.partial(tether_side.run_turns, inline=False),
        }
        results.durability[TETHER] = tether_side.DURABILITY
        if langgraph_side.available():
            results.durability[LANGGRAPH] = langgraph_side.DURABILITY
            runners[LANGGRAPH] = langgraph_side.run_turns
        else:
            results.skipped[LANGGRAPH] = SKIPPED
        if dbos_side is not None:
            results.durability[DBOS] = dbos_side.DURABILITY
            db = stack.enter_context(dbos_side.launched(tmp / "dbos"))
            runners[DBOS] = lambda where, t, reps: dbos_side.run_turns(db, t, reps)
        else:
            results.skipped[DBOS] = SKIPPED
        turns = _interleaved(sizes, tmp, runners)
        results.tether_threaded = turns.pop(THREADED)
        results.turns = turns

        _log("admission → settled latency")
        results.latency[TETHER] = tether_side.latency(tmp / "tether-latency", sizes.samples)
        if LANGGRAPH in runners:
            results.latency[LANGGRAPH] = langgraph_side.latency(tmp / "lg-latency", sizes.samples)
        if dbos_side is not None:
            results.latency[DBOS] = dbos_side.latency(db, sizes.samples)
    _measure_resume(sizes, tmp, results)


def _rounds(sizes: Sizes) -> str:
    if sizes.rounds == 1:
        return "once"
    return f"{sizes.rounds} times; each figure is from the round with the median time per turn"


TurnsRunner = Callable[[Path, int, int], TurnsResult]
"""Runs ``reps`` conversations of ``T`` turns, in a directory of its own."""


def _interleaved(
    sizes: Sizes, tmp: Path, runners: dict[str, TurnsRunner]
) -> dict[str, dict[int, TurnsResult]]:
    """Each system's conversations at each T, the systems taking turns, ``sizes.rounds``
    times; per system and T, the round with the median time per turn. Taking turns keeps a
    drift of the shared machine (or a warm-up) from landing on one system only."""
    rounds: dict[str, dict[int, list[TurnsResult]]] = {name: {} for name in runners}
    for name, run in runners.items():
        run(tmp / f"warm-{name}", 2, 1)
    for k in range(sizes.rounds):
        _log(f"conversations, round {k + 1} of {sizes.rounds}")
        for t in sizes.turns:
            for name, run in runners.items():
                result = run(tmp / f"{name}-{t}-{k}", t, sizes.reps(t))
                rounds[name].setdefault(t, []).append(result)
    return {
        name: {
            t: sorted(results, key=lambda r: r.ms_per_turn)[len(results) // 2]
            for t, results in by_t.items()
        }
        for name, by_t in rounds.items()
    }


def _copy(log: Path, run: int) -> Path:
    """A copy of a built log for one resume run: each adds a turn, the next resumes the same
    log."""
    copy = log.with_name(f"{log.name}-run-{run}")
    shutil.copytree(log, copy)
    return copy


def _measure_resume(sizes: Sizes, tmp: Path, results: Results) -> None:
    for length in sizes.resume:
        _log(f"cold resume and first turn at {length:,} records")
        where = tmp / f"resume-{length}"
        built = int(in_fresh_process("tether", "build", where / "tether", length)["count"])
        turns = max(1, math.ceil((built - 4) / RECORDS_PER_TURN))  # the same conversation
        runs = [
            in_fresh_process("tether", "resume", _copy(where / "tether", k))
            for k in range(sizes.resume_runs)
        ]
        ms = statistics.median(r["ms"] for r in runs)
        results.resume.setdefault(TETHER, {})[length] = (ms, built)
        results.resume_bytes[length] = tether_side.log_bytes(where / "tether")
        if LANGGRAPH not in results.skipped:
            in_fresh_process("langgraph", "build", where / "langgraph", turns)
            runs = [
                in_fresh_process("langgraph", "resume", _copy(where / "langgraph", k))
                for k in range(sizes.resume_runs)
            ]
            ms = statistics.median(r["ms"] for r in runs)
            results.resume.setdefault(LANGGRAPH, {})[length] = (ms, int(runs[0]["count"]))
        if DBOS not in results.skipped:
            in_fresh_process("dbos", "build", where / "dbos", turns)
            run = in_fresh_process("dbos", "resume", where / "dbos")
            results.resume.setdefault(DBOS, {})[length] = (run["ms"], int(run["count"]))


POSTGRES_FLAGS = {"postgres.py": "--url", "scale.py": "--postgres-url", "limits.py": "--url"}
"""The scripts that measure PostgreSQL, each with the flag naming the database it makes its
schemas in. ``postgres.py`` is skipped without one; the others then measure SQLite only."""


class _Postgres:
    """The database the scripts make their schemas in: the one the environment names
    (``TETHER_BENCH_POSTGRES_URL``, ``TETHER_TEST_POSTGRES_URL``), else one of the suite's
    own on the local server, created when a script first needs it and dropped at the end
    (never the database ``test``, unless named)."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self.stack = stack
        self.found: tuple[str | None, str] | None = None

    def url(self) -> tuple[str | None, str]:
        """The database's URL, or ``None`` and why there is none."""
        if self.found is None:
            self.found = self._find()
        return self.found

    def _find(self) -> tuple[str | None, str]:
        told = told_postgres_url()
        if told is not None:
            if postgres_answers(told):
                return told, ""
            return None, "skipped: no PostgreSQL at the database TETHER_*_POSTGRES_URL names"
        if not postgres_answers(LOCAL_POSTGRES):
            return None, (
                f"skipped: no PostgreSQL at {LOCAL_POSTGRES} (or set TETHER_BENCH_POSTGRES_URL)"
            )
        try:
            return self.stack.enter_context(own_database(LOCAL_POSTGRES)), ""
        except Exception as error:
            return None, f"skipped: could not create a database at {LOCAL_POSTGRES}: {error}"


def _run_scripts(sizes: Sizes, results: Results, tmp: Path) -> None:
    """Run each script in ``tmp`` (so whatever it leaves goes with it) and gather its goals."""
    with contextlib.ExitStack() as stack:
        postgres = _Postgres(stack)
        for script, args in sizes.scripts.items():
            _run_script(script, args, results, tmp, postgres)


def _run_script(
    script: str, args: list[str], results: Results, tmp: Path, postgres: _Postgres
) -> None:
    path = ROOT / "benchmarks" / script
    if not path.exists():
        results.scripts[script] = "skipped: not in this checkout"
        results.script_goals[script] = [Goal(f"{script} runs", "not in this checkout", None)]
        return
    shown = list(args)
    if script in POSTGRES_FLAGS:
        url, reason = postgres.url()
        if url is not None:
            args = [POSTGRES_FLAGS[script], url, *args]
            shown = [POSTGRES_FLAGS[script], "<database>", *shown]  # a URL may hold a password
        elif script == "postgres.py":
            results.scripts[script] = reason
            results.script_goals[script] = [Goal(f"{script}'s goals", reason, None)]
            return
    _log(f"benchmarks/{script} {' '.join(shown)}")
    cwd = tmp / f"script-{path.stem}"
    cwd.mkdir()
    done = subprocess.run(
        [sys.executable, str(path), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    text, goals = split_goals(done.stdout.strip())
    if done.returncode != 0:
        text += f"\n\nFAILED (exit {done.returncode}):\n{done.stderr.strip()[-2000:]}"
        failed = Goal(f"{script} runs to its end", f"FAILED (exit {done.returncode})", False)
        goals = [*(goals or []), failed]
    results.scripts[script] = text.strip()
    if goals:
        results.script_goals[script] = goals


# --- the report ------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 100 else f"{value:,.0f} ms"


def _bytes(value: float) -> str:
    return f"{value / 1024:,.1f} KB" if value >= 10_240 else f"{value:,.0f} B"


def _ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or theirs == 0:
        return "—"
    return f"{ours / theirs:.2f}x"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _headline(results: Results) -> tuple[str, list[Goal]]:
    peers = [p for p in (LANGGRAPH, DBOS) if p in results.turns]
    header = ["metric", TETHER]
    for peer in peers:
        header += [peer, f"{TETHER}/{peer}"]
    header.append("floor (same run)")
    rows: list[list[str]] = []

    def row(metric: str, values: dict[str, float], fmt: Callable[[float], str], floor: str) -> None:
        ours = values.get(TETHER)
        cells = [metric, fmt(ours) if ours is not None else "—"]
        for peer in peers:
            theirs = values.get(peer)
            cells += [fmt(theirs) if theirs is not None else "—", _ratio(ours, theirs)]
        rows.append([*cells, floor])

    def unmatched(metric: str, ours: str, floor: str) -> None:
        rows.append([metric, ours, *(["n/a", ""] * len(peers)), floor])

    floor = results.floor_ms
    tether_turns = results.turns[TETHER]
    for t, r in tether_turns.items():
        commits = (r.commits or 0) / (r.conversations * t)
        row(
            f"overhead per turn, T={t}",
            {s: rs[t].ms_per_turn - results.raw_turn_ms for s, rs in results.turns.items()},
            _ms,
            f"{commits:.1f} commits x {floor:.3f} ms = {commits * floor:.2f} ms",
        )
    for t, r in results.tether_threaded.items():
        unmatched(
            f"Tether overhead per turn, T={t}, every commit via the writer thread "
            "(inline_commits=False)",
            _ms(r.ms_per_turn - results.raw_turn_ms),
            "two thread hand-offs a commit more",
        )
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        row(
            f"admission → settled {name} (1 turn)",
            {s: percentile(times, q) for s, times in results.latency.items()},
            _ms,
            f"1 commit = {floor:.3f} ms",
        )
    for t in tether_turns:
        row(
            f"bytes stored per message, T={t}",
            {s: rs[t].bytes_per_message for s, rs in results.turns.items()},
            _bytes,
            "payload 300 B",
        )
    for t, r in tether_turns.items():
        records, payload = r.records or 1, r.payload_bytes or 0
        rows.append(
            [f"Tether bytes per record, T={t}", _bytes(r.disk_bytes / records)]
            + ["", ""] * len(peers)
            + [f"payload 300 B; encoded body {payload / records:,.0f} B"]
        )
    for length, (disk, snapshot) in results.resume_bytes.items():
        count = results.resume[TETHER][length][1]
        if snapshot:
            rows.append(
                [f"Tether bytes per record, a {count:,}-record log", _bytes(disk / count)]
                + ["", ""] * len(peers)
                + [f"of which its snapshot {_bytes(snapshot / count)} (one, of the transcript)"]
            )
    for length, (_, count) in results.resume.get(TETHER, {}).items():
        counts = ", ".join(
            f"{p} {results.resume[p][length][1]:,} {'msgs' if p == LANGGRAPH else 'steps'}"
            for p in peers
            if length in results.resume.get(p, {})
        )
        row(
            f"cold resume and first turn, {count:,} records" + (f" ({counts})" if counts else ""),
            {s: rs[length][0] for s, rs in results.resume.items() if length in rs},
            _ms,
            "",
        )
    replay = _replay_figures(results.scripts.get("replay.py", ""))
    if replay:
        unmatched(
            f"replay of a {replay.size}-record log",
            f"{replay.replay_ms:.1f} ms",
            f"read of the same log {replay.read_ms:.1f} ms, "
            f"read and decode {replay.decode_ms:.1f} ms",
        )
    sse = re.search(
        r"catch-up, 1 subscriber \(records/s\)\s+([\d,]+)\s+([\d,]+)",
        results.scripts.get("sse.py", ""),
    )
    if sse:
        unmatched(
            "records/s over SSE (1 subscriber)",
            sse.group(2),
            f"bare Starlette, same frames: {sse.group(1)}",
        )
    return _table(header, rows), _goals(results)


def _goals(results: Results) -> list[Goal]:
    """The suite's own goals (each script states its own). ``results.judged`` false: all
    n/a; a peer not installed: its goals n/a."""
    judge = results.judged
    goals: list[Goal] = []
    ours = results.turns[TETHER]
    ts = sorted(ours)
    first, last = ts[0], ts[-1]
    per = {t: ours[t].ms_per_turn - results.raw_turn_ms for t in ts}
    lg_goals = (
        (f"overhead/turn ≤ 0.35x LangGraph-sync at T={first}", first, 0.35),
        (f"overhead/turn ≤ 0.1x LangGraph-sync at T={last}", last, 0.1),
    )
    for text, t, bound in lg_goals:
        if LANGGRAPH in results.turns:
            ratio = per[t] / (results.turns[LANGGRAPH][t].ms_per_turn - results.raw_turn_ms)
            goals.append(Goal(text, f"{ratio:.2f}x", judged(ratio <= bound, judge)))
        else:
            goals.append(Goal(text, results.skipped.get(LANGGRAPH, "not run"), None))
    text = "overhead/turn ≤ 0.25x DBOS (every T)"
    if DBOS in results.turns:
        db = results.turns[DBOS]
        worst = max(per[t] / (db[t].ms_per_turn - results.raw_turn_ms) for t in ts)
        goals.append(Goal(text, f"worst {worst:.2f}x", judged(worst <= 0.25, judge)))
    else:
        goals.append(Goal(text, results.skipped.get(DBOS, "not run"), None))
    growth = per[last] / per[first]
    goals.append(
        Goal(
            f"overhead/turn flat in T (T={last} within +20% of T={first})",
            f"{growth:.2f}x",
            judged(growth <= 1.2, judge),
        )
    )
    per_record = {t: ours[t].disk_bytes / (ours[t].records or 1) for t in ts}
    worst_bytes = max(per_record.values())
    goals.append(
        Goal(
            "bytes per record ≤ 2x the 300-byte payload",
            f"{worst_bytes:,.0f} B ({worst_bytes / 300:.1f}x)",
            judged(worst_bytes <= 600, judge),
        )
    )
    smallest = min(per_record.values())
    # A run too small to grow the file by a page measures 0 bytes: no ratio to report.
    spread = max(per_record.values()) / smallest if smallest > 0 else float("inf")
    goals.append(
        Goal(
            "bytes per record constant in T (within ±15%)",
            f"max/min {spread:.2f}" if smallest > 0 else "too small a run to measure",
            judged(spread <= 1.15, judge and smallest > 0),
        )
    )
    # Issue 26 item 3: the server's default commit path against the fsync floor of the
    # commits the turn makes, each raw sqlite3 commit timed in this run.
    for t, r in sorted(ours.items()):
        commits = (r.commits or 0) / (r.conversations * t)
        floor = commits * results.floor_ms
        over = r.ms_per_turn - results.raw_turn_ms
        goals.append(
            Goal(
                f"overhead/turn ≤ 2x the fsync floor, server default commits, T={t}",
                f"{over / floor:.2f}x ({_ms(over)} vs {commits:.2f} commits x "
                f"{results.floor_ms:.3f} ms)"
                if floor
                else "no commits measured",
                judged(floor > 0 and over <= 2 * floor, judge),
            )
        )
    resumes = results.resume.get(TETHER, {})
    if resumes:
        length = max(resumes)
        ms, count = resumes[length]
        goals.append(
            Goal(
                f"cold resume of a {count:,}-record log, open and first turn, ≤ 50 ms",
                _ms(ms),
                judged(ms <= 50, judge and length >= 10_000),
            )
        )
    return goals


@dataclass(frozen=True)
class ReplayFigures:
    size: str
    read_ms: float
    decode_ms: float
    replay_ms: float


def _replay_figures(table: str) -> ReplayFigures | None:
    """The figures ``benchmarks/replay.py`` printed, if it ran."""
    size = re.search(r"Replay of a ([\d,]+)-record", table)
    times = [
        re.search(label + r"\s+([\d.]+) ms", table)
        for label in ("read the log", "read and decode every record", "replay every turn")
    ]
    if size is None or not all(times):
        return None
    read, decode, replay = (float(match.group(1)) for match in times if match)
    return ReplayFigures(size.group(1), read, decode, replay)


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = []
    for package in ("langgraph", "langgraph-checkpoint-sqlite", "dbos"):
        try:
            from importlib.metadata import version

            versions.append(f"{package} {version(package)}")
        except Exception:
            versions.append(f"{package} not installed")
    return (
        f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {', '.join(versions)}"
    )


def run(quick: bool, out: Path, *, scripts: bool = True) -> Path:
    """Run the suite; write ``out/<date>.md`` (``<date>-quick.md`` for a quick run) and its
    PNG plots; print the summary. Returns the results file."""
    sizes = QUICK if quick else FULL
    results = Results(judged=sizes.judged)
    started = time.perf_counter()
    with scratch() as tmp:
        (tmp / "suite").mkdir()
        _measure_peers(sizes, tmp / "suite", results)
        if scripts:
            _run_scripts(sizes, results, tmp)
    headline, own_goals = _headline(results)
    goals = [(SUITE, goal) for goal in own_goals] + [
        (f"benchmarks/{script}", goal)
        for script, script_goals in results.script_goals.items()
        for goal in script_goals
    ]

    out.mkdir(parents=True, exist_ok=True)
    stem = datetime.now(UTC).strftime("%Y-%m-%d") + ("-quick" if quick else "")
    plots = _plots(results, out, stem)
    lines = [
        f"# Tether benchmarks, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
        + (" (quick smoke run: sizes too small to judge)" if quick else ""),
        "",
        f"Machine: {_machine()}. Suite took {time.perf_counter() - started:,.0f} s.",
        "",
        "Workload: the same deterministic fake model for every system: zero latency, 300-byte "
        "messages, one `lookup` tool call per turn (300-byte result), then a 300-byte final "
        "answer; a conversation of T turns holds 2T+2 messages. Overhead per turn = wall time "
        "of the conversation / T, minus the fake model and tool called directly "
        f"({results.raw_turn_ms * 1000:.1f} µs a turn). Floor: one 300-byte INSERT committed "
        f"by raw sqlite3 (WAL, synchronous=FULL) = {results.floor_ms:.3f} ms in this run. "
        f"The systems take turns at each T, {_rounds(sizes)}.",
        "",
        "Durability (strict everywhere; nothing relaxed is compared):",
        "",
        *[f"- **{name}**: {text}" for name, text in results.durability.items()],
        *[f"- **{name}**: {text}" for name, text in results.skipped.items()],
        "",
        "How each system is driven:",
        "",
        "- **Tether**: the built-in `tether.agent.Agent` harness in a `Journal` opened with "
        "`Journal.open_session` on a new session key (one commit creates the conversation; "
        "one execution per conversation; 4 records and 2 commits a turn: the model call's "
        "records ride with the tool's intent, which is durable before the tool runs, then the "
        "tool's outcome), "
        "a fake `Model` + a `@tool`, on a store opened as the server opens it (the default "
        "`inline_commits=True`: a commit that finds the writer idle runs on the agent's "
        "thread, as LangGraph's and DBOS's do; the rows marked *writer thread* send every "
        "commit through the writer thread instead). Admission → settled goes through the "
        "server path: `Runtime.dispatch` → durable queue → claim → run → settlement → "
        "`Runtime.wait`, on the default store.",
        "- **LangGraph**: `StateGraph` model ↔ tool loop, `add_messages`, one `invoke` per "
        "conversation on a new thread (2T+1 supersteps). Latency = `invoke` of 1 turn.",
        "- **DBOS**: one `@DBOS.workflow` per conversation, `@DBOS.step` model and tool "
        "calls (2T+1 steps), `start_workflow` + `get_result`, no queue.",
        "- **Cold resume and first turn** (a fresh process, imports done beforehand; each run "
        "on a copy of the same log): the open, then one more turn of the fake model (a tool "
        "call, its result, the final answer), every commit on disk. Tether opens the store "
        "(`inline_commits=True`) and the journal, then runs a `Journal.exec` of the agent, "
        "which takes in what the turn starts from (past 4,096 records: the snapshot the "
        "log's writer kept as it grew, the latest execution's records and every record after "
        "the snapshot; older records are read only when a full view is asked for) and sends "
        "the model the whole history; LangGraph connects and `invoke`s the turn on the thread, "
        "which loads its latest checkpoint (written in one `update_state`, so its history of "
        "checkpoints is shorter than a real run's); DBOS is killed (`os._exit`) mid-workflow, "
        "then `DBOS.launch()` recovers the workflow, replays its recorded steps and runs the "
        "turn's three steps (includes launch). "
        "All three hold the same conversation: L records in Tether.",
        "",
        "## Side by side",
        "",
        headline,
        "",
        "## Goals",
        "",
        "Every goal of the suite and of each script, met or not (n/a: not judged in this "
        "run: sizes too small to judge, or what it needs did not run).",
        "",
        goals_table([goal for _, goal in goals], source=[source for source, _ in goals]),
        "",
    ]
    if plots:
        lines += ["## Plots", "", *[f"![{p.stem}]({p.name})" for p in plots], ""]
    if results.scripts:
        lines += ["## Existing benchmarks", ""]
        for script, text in results.scripts.items():
            lines += [f"### benchmarks/{script}", "", "```", text, "```", ""]
    path = out / f"{stem}.md"
    path.write_text("\n".join(lines))
    print("\n" + headline + "\n")
    print(_summary(goals))
    print(f"\nwrote {path}" + "".join(f"\nwrote {p}" for p in plots))
    return path


def _summary(goals: Sequence[tuple[str, Goal]]) -> str:
    """Every goal, one a line, the missed ones marked MISSED."""
    missed = sum(goal.met is False for _, goal in goals)
    met = sum(goal.met is True for _, goal in goals)
    lines = [
        f"Goals: {len(goals)}, {met} met, {missed} MISSED, {len(goals) - met - missed} not judged"
    ]
    for source, goal in goals:
        verdict = {True: "met", False: "MISSED", None: "n/a"}[goal.met]
        lines.append(f"  {verdict:6}  {goal.goal}: {goal.measured}  [{source}]")
    return "\n".join(lines)


def _plots(results: Results, out: Path, stem: str) -> list[Path]:
    overhead = {
        s: {t: r.ms_per_turn - results.raw_turn_ms for t, r in rs.items()}
        for s, rs in results.turns.items()
    }
    stored = {s: {t: r.bytes_per_message for t, r in rs.items()} for s, rs in results.turns.items()}
    resume = {s: {n: ms for n, (ms, _) in rs.items()} for s, rs in results.resume.items()}
    made = [
        plot_lines(
            out / f"{stem}-overhead.png",
            "Overhead per turn (strict durability)",
            "turns T",
            "ms per turn",
            overhead,
        ),
        plot_lines(
            out / f"{stem}-bytes.png",
            "Bytes stored per 300-byte message",
            "turns T",
            "bytes per message",
            stored,
            log=True,
        ),
        plot_lines(
            out / f"{stem}-resume.png",
            "Cold resume and first turn vs log length",
            "log length (Tether records)",
            "ms",
            resume,
            log=True,
        ),
    ]
    return [p for p in made if p is not None]
