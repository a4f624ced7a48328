"""The workspace tools' cost: their work in a worker process (now) beside a thread (before).

    python benchmarks/workspace_search.py [--rounds 5]

Copies this repository's ``src``, ``tests``, ``docs``, ``benchmarks`` and ``examples`` (a
typical tree to search: about 600 files, 5 MB) into a scratch directory, then times, in
interleaved rounds, each operation two ways:

- before: the tool's blocking function run in a thread of this process (``asyncio.to_thread``),
  ``grep`` on Python's ``re`` line by line, as the tools ran until issue 36;
- now: the tool as a model calls it, its work done by a warm worker process (``grep`` on RE2
  where it can, searching each file whole).

Beside each median it shows the longest the event loop went without a tick (a task sleeping
1 ms at a time) during the calls: a thread holding the GIL stops the loop, a worker never
does. The last rows are a worker's start (a new pool's first call, once per worker) and the
backtracking pattern of the issue, ``(a*)*b`` against a line of 22 a's.

The goal (issue 36 item 4): the event loop keeps ticking, under 50 ms gaps, while the worst
pattern runs. It ends with its goals table.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import tether.tools._pool as pool_module
import tether.tools._regex as regex_module
from benchmarks._measure import scratch
from benchmarks._table import Goal, judged, print_goals, print_table
from tether.agent import Tool
from tether.tools import DEFAULT_IGNORE, workspace
from tether.tools._files import Limits, read_text
from tether.tools._paths import Root
from tether.tools._pool import WorkerPool
from tether.tools._search import glob_paths, grep_files

REPOSITORY = Path(__file__).resolve().parent.parent
TREES = ("src", "tests", "docs", "benchmarks", "examples")
LIMITS = Limits(256 * 1024, 1024 * 1024, 10 * 1024 * 1024, 64 * 1024)
IGNORED = frozenset(DEFAULT_IGNORE)
WORST = "(a*)*b"

Call = Callable[[], Awaitable[Any]]


async def with_gap(call: Call) -> tuple[float, float]:
    """The call's time, and the longest gap between ticks of the event loop meanwhile."""
    last = time.monotonic()
    longest = 0.0

    async def tick() -> None:
        nonlocal last, longest
        while True:
            await asyncio.sleep(0.001)
            now = time.monotonic()
            longest, last = max(longest, now - last), now

    ticker = asyncio.create_task(tick())
    start = time.perf_counter()
    try:
        await call()
    finally:
        elapsed = time.perf_counter() - start
        longest = max(longest, time.monotonic() - last)
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
    return elapsed, longest


def before_grep(root: Root, pattern: str, ignore_case: bool = False, path: str = ".") -> Call:
    def search() -> str:
        saved, regex_module.RE2 = regex_module.RE2, None  # re, line by line
        try:
            return grep_files(root, pattern, path, None, ignore_case, LIMITS, IGNORED)
        finally:
            regex_module.RE2 = saved

    return lambda: asyncio.to_thread(search)


def now(tool: Tool, **arguments: Any) -> Call:
    defaults: dict[str, dict[str, Any]] = {
        "grep": {"path": ".", "glob": None, "ignore_case": False},
        "glob": {"path": "."},
    }
    return lambda: tool.fn(**{**defaults.get(tool.name, {}), **arguments})


async def cold_start(root: Path) -> float:
    """A new pool's first call: a worker's start and its answer."""
    pool = WorkerPool()
    saved = pool_module.shared_pool
    pool_module.shared_pool = lambda: pool
    try:
        read = {tool.name: tool for tool in workspace(root)}["read"]
        elapsed, _ = await with_gap(now(read, path="README.md", offset=1, limit=None))
        return elapsed
    finally:
        pool_module.shared_pool = saved
        pool.close()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with scratch() as tmp:
        for tree in TREES:
            shutil.copytree(REPOSITORY / tree, tmp / tree, ignore=shutil.ignore_patterns(*IGNORED))
        shutil.copy(REPOSITORY / "README.md", tmp / "README.md")
        (tmp / "worst.txt").write_text("a" * 22 + "\n")
        files = sum(1 for path in tmp.rglob("*") if path.is_file())
        size = sum(path.stat().st_size for path in tmp.rglob("*") if path.is_file())
        root = Root(tmp)
        tools = {tool.name: tool for tool in workspace(tmp)}
        grep, glob, read = tools["grep"], tools["glob"], tools["read"]
        pairs: dict[str, tuple[Call, Call]] = {
            "grep 'TODO'": (before_grep(root, "TODO"), now(grep, pattern="TODO")),
            r"grep 'def \w+\(self'": (
                before_grep(root, r"def \w+\(self"),
                now(grep, pattern=r"def \w+\(self"),
            ),
            "grep 'timeout', ignore_case": (
                before_grep(root, "timeout", True),
                now(grep, pattern="timeout", ignore_case=True),
            ),
            "glob '**/*.py'": (
                lambda: asyncio.to_thread(glob_paths, root, "**/*.py", ".", LIMITS, IGNORED),
                now(glob, pattern="**/*.py"),
            ),
            "read README.md": (
                lambda: asyncio.to_thread(read_text, root, "README.md", 1, None, LIMITS),
                now(read, path="README.md", offset=1, limit=None),
            ),
            f"grep {WORST!r}, 22 a's": (  # any line with a b matches: the a's only
                before_grep(root, WORST, path="worst.txt"),
                now(grep, pattern=WORST, path="worst.txt"),
            ),
        }
        await now(read, path="README.md", offset=1, limit=None)()  # the shared pool, warm
        times: dict[tuple[str, int], list[tuple[float, float]]] = {}
        starts: list[float] = []
        for _ in range(args.rounds):  # interleaved: a drift of the machine lands on each alike
            for name, calls in pairs.items():
                for way, call in enumerate(calls):
                    times.setdefault((name, way), []).append(await with_gap(call))
            starts.append(await cold_start(tmp))

    def median(name: str, way: int, index: int) -> float:
        return statistics.median(sample[index] for sample in times[(name, way)])

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:,.1f} ms"

    rows = [
        (
            name,
            ms(median(name, 0, 0)),
            ms(median(name, 1, 0)),
            ms(max(sample[1] for sample in times[(name, 0)])),
            ms(max(sample[1] for sample in times[(name, 1)])),
        )
        for name in pairs
    ]
    rows.append(("a worker's start (once)", "", ms(statistics.median(starts)), "", ""))
    print_table(
        f"Workspace tools on a {files:,}-file, {size / 2**20:.1f} MiB tree (median of "
        f"{args.rounds}; RE2 {'installed' if regex_module.RE2 is not None else 'absent'})",
        ("operation", "before: thread", "now: worker", "loop gap before", "loop gap now"),
        rows,
    )
    worst_gap = max(sample[1] for sample in times[(f"grep {WORST!r}, 22 a's", 1)])
    print_goals(
        [
            Goal(
                "the loop ticks (gaps < 50 ms) while the worst grep pattern runs",
                ms(worst_gap),
                judged(worst_gap < 0.05, True),
            )
        ]
    )


if __name__ == "__main__":
    asyncio.run(main())
