"""What ``benchmarks/postgres.py --results DIR`` writes: a results page beside the suite's
(``benchmarks/results``), with the served path's plot."""

from __future__ import annotations

import io
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from benchmarks._served_run import Served, load, plot
from benchmarks._table import goals_table, split_goals

__all__ = ("Tee", "write_results")


class Tee(io.TextIOBase):
    """Writes to stdout and keeps a copy (what ``--results`` writes out)."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.kept = out, io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.out.write(text)

    def flush(self) -> None:
        self.out.flush()


def write_results(
    folder: Path,
    text: str,
    served: Served | None,
    started: float,
    server_version: str,
    how: str = "",
) -> None:
    """``DIR/<date>-postgres.md``: the machine, the command, the goals, the plot and what
    the script printed (its goals table moved to the top)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = datetime.now(UTC).strftime("%Y-%m-%d") + "-postgres"
    plots = []
    if served is not None and served.drains:
        made = plot(served, folder / f"{stem}-served.png")
        if made is not None:
            plots.append(made)
    body, goals = split_goals(text)
    lines = [
        f"# PostgreSQL: the store and the served path, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"PostgreSQL {server_version}; run took {time.monotonic() - started:.0f} s; "
        + ("; ".join(served.loads) if served is not None else load())
        + " (start, after the timed runs, after the counted ones).",
        "",
        "Command: `python benchmarks/postgres.py " + " ".join(_shown_args()) + "`",
        "",
    ]
    if how:
        lines += [how.strip(), ""]
    if goals is not None:
        lines += ["## Goals", "", goals_table(goals), ""]
    lines += [f"![{p.stem}]({p.name})" for p in plots]
    lines += ["", "## Output", "", "```", body.strip(), "```", ""]
    (folder / f"{stem}.md").write_text("\n".join(lines))


def _shown_args() -> list[str]:
    shown, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            shown.append("<database>")  # a URL may hold a password
            skip = False
        elif arg == "--url":
            shown.append(arg)
            skip = True
        else:
            shown.append(arg)
    return shown
