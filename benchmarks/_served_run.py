"""The served-path section of ``benchmarks/postgres.py``: the runs, their tables and goals.

``benchmarks/_served.py`` says how a run goes, ``benchmarks/_served_count.py`` how it is
counted; this module runs them (Tether and DBOS alternating which goes first at each worker
count, so a drift in the machine's load does not always favour the same side) and prints.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._served import (
    Drain,
    Side,
    TetherSide,
    Workers,
    dbos_available,
    drain,
    summary,
)
from benchmarks._served_count import Counted, count
from benchmarks._table import Goal, judged, print_table
from benchmarks._workloads import TURNS
from tether.engine import RuntimeConfig

__all__ = ("GOAL_RATIO", "Served", "goals", "load", "plot", "report", "run")

GOAL_RATIO = 2.0
JUDGED_SUBMISSIONS = 1_000
SKIPPED = "skipped: install tether[bench] (dbos)"
CONCURRENCY = RuntimeConfig().max_concurrent_runs  # DBOS gets what a Tether worker runs at once


@dataclass
class Served:
    submissions: int
    workers: list[int]
    poll: float
    drains: list[Drain] = field(default_factory=list)
    counted: dict[str, Counted] = field(default_factory=dict)
    skipped: str | None = None
    loads: list[str] = field(default_factory=list)

    def get(self, side: str, workload: str, workers: int) -> Drain | None:
        for d in self.drains:
            if (d.side, d.workload, d.workers) == (side, workload, workers):
                return d
        return None


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def _sides(base: str, poll: float, dbos: bool) -> list[Any]:
    def tether() -> Side:
        return TetherSide(base, f"served_tether_{uuid.uuid4().hex[:10]}")

    makers: list[Any] = [tether]
    if dbos:
        from benchmarks.peers.dbos_queue import DbosSide

        def dbos_side() -> Side:
            return DbosSide(base, f"served_dbos_{uuid.uuid4().hex[:10]}", poll, CONCURRENCY)

        makers.append(dbos_side)
    return makers


async def run(
    base: str,
    workers: Sequence[int],
    submissions: int,
    samples: int,
    *,
    count_submissions: int,
    singles: int,
    poll: float,
    dbos: bool = True,
    log: Any = print,
) -> Served:
    skipped = None if dbos and dbos_available() else SKIPPED if dbos else "skipped: --no-dbos"
    dbos = skipped is None
    served = Served(submissions, list(workers), poll, skipped=skipped)
    makers = _sides(base, poll, dbos)
    served.loads.append(load())
    for turn, n in enumerate(workers):
        for make in makers if turn % 2 == 0 else makers[::-1]:
            side: Side = make()
            log(f"served: {side.name}, {n} worker(s), {submissions} submissions a workload")
            await side.migrate()
            try:
                argvs = [side.worker_argv(base, k) for k in range(n)]
                async with Workers(argvs, side.ready) as running:
                    pids = [process.pid for process in running.processes]
                    async with side.admitter(base) as admit:
                        for workload in TURNS:
                            served.drains.append(
                                await drain(
                                    side, base, admit, workload, n, submissions, samples, pids
                                )
                            )
            finally:
                side.drop()
    served.loads.append(load())
    for make in makers if count_submissions > 0 else ():
        side = make()
        log(f"served: {side.name} counted on the wire, 1 worker, {count_submissions} a workload")
        await side.migrate()
        try:
            served.counted[side.name] = await count(
                side, base, list(TURNS), count_submissions, singles
            )
        finally:
            side.drop()
    served.loads.append(load())
    return served


# --- what it prints ---------------------------------------------------------------------------


def _rate(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:,.0f}/s"


def _ms(values: Sequence[float] | None) -> str:
    if not values:
        return "n/a"
    p50, p99 = summary(values)
    return f"{p50:,.1f} / {p99:,.1f}"


def report(served: Served) -> None:
    dbos_note = served.skipped or (
        f"DBOS {_version('dbos')}: queue workers, worker_concurrency={CONCURRENCY} (a Tether "
        f"worker's max_concurrent_runs), polling_interval_sec={served.poll}"
    )
    rows = []
    for workload in TURNS:
        for n in served.workers:
            t, d = served.get("Tether", workload, n), served.get("DBOS", workload, n)
            ratio = t.settled_per_s / d.settled_per_s if t and d else None
            rows.append(
                (
                    f"{workload} ({TURNS[workload]} tool turn{'s' if TURNS[workload] > 1 else ''})",
                    str(n),
                    _rate(t.settled_per_s if t else None),
                    _rate(d.settled_per_s if d else None),
                    "n/a" if ratio is None else f"{ratio:.2f}x",
                    "n/a" if ratio is None else ("met" if ratio >= GOAL_RATIO else "not met"),
                    _ms(t.waits_ms if t else None),
                    _ms(d.waits_ms if d else None),
                    _ms(t.runs_ms if t else None),
                    _ms(d.runs_ms if d else None),
                )
            )
    print_table(
        f"Served path on PostgreSQL: N worker processes drain a backlog of {served.submissions:,} "
        f"submissions (zero-latency model, one idempotent tool call a turn), Tether (`tether "
        f"worker`) beside DBOS in the same run, one side at a time; settled/s between the 10th "
        f"and 90th percentile settlements; backlog waits from the gate's opening; {dbos_note}; "
        f"{' -> '.join(served.loads[:2])}",
        (
            "workload",
            "workers",
            "Tether settled/s",
            "DBOS settled/s",
            "Tether/DBOS",
            f"goal >= {GOAL_RATIO:.0f}x",
            "Tether open->settled p50/p99 ms",
            "DBOS open->settled p50/p99 ms",
            "Tether claim->settled p50/p99 ms",
            "DBOS claim->settled p50/p99 ms",
        ),
        rows,
    )
    latency_rows = []
    for workload in TURNS:
        for n in served.workers:
            t, d = served.get("Tether", workload, n), served.get("DBOS", workload, n)
            latency_rows.append(
                (
                    workload,
                    str(n),
                    _ms(t.latency_ms if t else None),
                    _ms(d.latency_ms if d else None),
                    _rate(t.admissions_per_s if t else None),
                    _rate(d.admissions_per_s if d else None),
                )
            )
    samples = next((len(d.latency_ms) for d in served.drains), 0)
    print_table(
        f"Admission -> settled, {samples} submissions one at a time (each admitted once the "
        "previous settled) with the N workers otherwise idle, from the stores' own timestamps; "
        "admissions/s of the backlog (one client, one admission at a time: Runtime.dispatch, "
        "DBOSClient.enqueue)",
        (
            "workload",
            "workers",
            "Tether p50/p99 ms",
            "DBOS p50/p99 ms",
            "Tether admissions/s",
            "DBOS admissions/s",
        ),
        latency_rows,
    )
    _report_scaling(served)


def _report_scaling(served: Served) -> None:
    """Throughput against N with the cores each part kept busy: where adding a worker stops
    paying, and which part of the machine it ran out of."""
    rows = []
    for workload in TURNS:
        for side in ("Tether", "DBOS"):
            first = served.get(side, workload, served.workers[0])
            for n in served.workers:
                drain = served.get(side, workload, n)
                if drain is None or first is None:
                    continue
                speedup = drain.settled_per_s / first.settled_per_s
                ideal = n / served.workers[0]
                rows.append(
                    (
                        workload,
                        side,
                        str(n),
                        _rate(drain.settled_per_s),
                        f"{speedup:.2f}x of {ideal:.0f}x",
                        str(drain.cores) if drain.cores is not None else "n/a",
                    )
                )
    print_table(
        f"Scaling across cores: settled/s against the worker count, and the cores the backlog "
        f"kept busy on average, gate to drained (from /proc: the workers' processes, "
        f"PostgreSQL's, every process of the machine; {os.cpu_count()} CPUs, so the workers, "
        f"PostgreSQL, the admitting client and this script share them)",
        (
            "workload",
            "side",
            "workers",
            "settled/s",
            "vs 1 worker (ideal)",
            "cores busy: workers / PostgreSQL / all",
        ),
        rows,
    )
    _report_counts(served)


def _version(package: str) -> str:
    from importlib.metadata import version

    try:
        return version(package)
    except Exception:
        return "?"


def _report_counts(served: Served) -> None:
    if not served.counted:
        return
    rows = []
    for name, counted in served.counted.items():
        for workload, cost in counted.costs.items():
            rows.append(
                (
                    name,
                    workload,
                    f"{cost.statements:.1f}",
                    f"{cost.round_trips:.1f}",
                    f"{cost.commits:.1f}",
                    f"{cost.write_commits:.1f}",
                    f"{cost.admit_statements:.1f} / {cost.admit_round_trips:.1f} / "
                    f"{cost.admit_commits:.1f}",
                )
            )
        rows.append(
            (
                name,
                "idle worker, per second",
                f"{counted.idle_statements_per_s:.0f}",
                f"{counted.idle_round_trips_per_s:.0f}",
                f"{counted.idle_commits_per_s:.0f}",
                "",
                "",
            )
        )
    some = next(iter(served.counted.values()))
    print_table(
        f"Per submission, counted on the wire (benchmarks/_pgwire.py: pg_stat_statements is not "
        f"loaded on this server), 1 worker draining {some.submissions} submissions a workload "
        "through a counting proxy (so untimed): the worker's statements (Query or Execute), "
        "round trips (turns of the conversation: a pipeline's statements count once), commits "
        "(explicit, and autocommit statements) and those with a row write or lock in them; "
        "the admitting client's statements / round trips / commits",
        (
            "side",
            "workload",
            "statements",
            "round trips",
            "commits",
            "write commits",
            "admission st/rt/commits",
        ),
        rows,
    )
    for name, counted in served.counted.items():
        single = counted.median_single()
        if single is None:
            continue
        idle = counted.idle_statements_per_s * single.seconds
        print_table(
            f"{name}: one submission (one tool call) with the worker idle, from its admission "
            f"to its settlement and {0.1:.1f} s after: the worker's "
            f"{single.worker.statements} statements, {single.worker.round_trips} round trips, "
            f"{single.worker.commits} commits ({single.worker.write_commits} with a write), "
            f"the median of {len(counted.singles)} such submissions; an idle worker would have "
            f"sent {idle:.1f} in the same {single.seconds * 1000:.0f} ms; the admission: "
            f"{single.client.statements} statements, {single.client.commits} commits",
            ("statement class (worker, in order of first use)", "count"),
            [(label, str(n)) for label, n in single.worker_classes()]
            + [("admission: " + label, str(n)) for label, n in single.client_classes()],
        )
        if name == "Tether":
            start = single.statements[0].at if single.statements else 0.0
            print_table(
                f"{name}: that submission's statements in the order sent (ms from its "
                "admission; conn: the proxy's connection number)",
                ("ms", "who", "conn", "statement"),
                [
                    (
                        f"{(s.at - start) * 1000:.1f}",
                        s.source,
                        str(s.connection),
                        text,
                    )
                    for s, (_, text) in zip(
                        single.statements, _texts(single.statements), strict=True
                    )
                ],
            )


def _texts(statements: Sequence[Any]) -> list[tuple[str, str]]:
    from benchmarks._pgwire import label, normalized

    out = []
    for s in statements:
        text = normalized(s.text)
        out.append((label(s.text), text if len(text) <= 160 else text[:159] + "…"))
    return out


def goals(served: Served) -> list[Goal]:
    out = []
    big = served.submissions >= JUDGED_SUBMISSIONS
    for workload in TURNS:
        for n in served.workers:
            text = (
                f"served settled/s, {workload} ({TURNS[workload]} tool turn"
                f"{'s' if TURNS[workload] > 1 else ''}), {n} worker{'s' if n > 1 else ''}: "
                f"Tether ≥ {GOAL_RATIO:.0f}x DBOS"
            )
            t, d = served.get("Tether", workload, n), served.get("DBOS", workload, n)
            if t is None or d is None:
                out.append(Goal(text, served.skipped or "not run", None))
                continue
            ratio = t.settled_per_s / d.settled_per_s
            measured = f"{ratio:.2f}x ({t.settled_per_s:,.0f}/s vs {d.settled_per_s:,.0f}/s)"
            out.append(Goal(text, measured, judged(ratio >= GOAL_RATIO, big)))
    return out


def plot(served: Served, path: Path) -> Path | None:
    """settled/s against the worker count, a line per side and workload (``None`` without
    matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axes = plt.subplots(figsize=(6.4, 4.8), dpi=110)
    for side, colour in (("Tether", "tab:blue"), ("DBOS", "tab:red")):
        for workload, style in zip(TURNS, ("-", "--"), strict=False):
            points = sorted(
                (d.workers, d.settled_per_s)
                for d in served.drains
                if d.side == side and d.workload == workload
            )
            if points:
                axes.plot(
                    [n for n, _ in points],
                    [rate for _, rate in points],
                    style,
                    color=colour,
                    marker="o",
                    label=f"{side}, {workload} ({TURNS[workload]} tool turn"
                    f"{'s' if TURNS[workload] > 1 else ''})",
                )
    axes.set_xticks(served.workers)
    axes.set_ylim(bottom=0)
    axes.set_title(f"PostgreSQL served path: settled/s draining {served.submissions:,}")
    axes.set_xlabel(f"worker processes ({os.cpu_count()} CPUs, shared with PostgreSQL)")
    axes.set_ylabel("settled/s (10th-90th percentile)")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize="small")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path
