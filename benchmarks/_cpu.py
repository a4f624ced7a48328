"""CPU seconds from ``/proc``: how many cores a drain kept busy, split between the worker
processes, PostgreSQL's processes and the whole machine (Linux only; ``nan`` elsewhere)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ("CoresBusy", "CpuSample")

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PROC = Path("/proc")


def _process_seconds(pid: int) -> float:
    """User plus system time of one process (0 once it is gone)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return 0.0
    fields = text.rpartition(")")[2].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICK


def _postgres_pids() -> list[int]:
    pids = []
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _machine_seconds() -> float:
    """Busy time of every CPU together (all but idle and iowait)."""
    fields = (_PROC / "stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICK


@dataclass(frozen=True)
class CpuSample:
    at: float
    workers: float
    postgres: dict[int, float]
    machine: float

    @classmethod
    def now(cls, worker_pids: Sequence[int]) -> CpuSample:
        if not _PROC.is_dir():
            return cls(time.monotonic(), math.nan, {}, math.nan)
        return cls(
            time.monotonic(),
            sum(_process_seconds(pid) for pid in worker_pids),
            {pid: _process_seconds(pid) for pid in _postgres_pids()},
            _machine_seconds(),
        )


@dataclass(frozen=True)
class CoresBusy:
    """Cores kept busy between two samples, on average."""

    workers: float
    postgres: float
    machine: float

    @classmethod
    def between(cls, start: CpuSample, end: CpuSample) -> CoresBusy:
        wall = end.at - start.at
        if wall <= 0:
            return cls(math.nan, math.nan, math.nan)
        # A backend that started during the window counts from zero; one that ended is lost.
        postgres = sum(
            seconds - start.postgres.get(pid, 0.0) for pid, seconds in end.postgres.items()
        )
        return cls(
            (end.workers - start.workers) / wall,
            postgres / wall,
            (end.machine - start.machine) / wall,
        )

    def __str__(self) -> str:
        if math.isnan(self.machine):
            return "n/a"
        return f"{self.workers:.2f} / {self.postgres:.2f} / {self.machine:.2f}"
