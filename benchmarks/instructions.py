"""The CPU a turn costs, counted in instructions (valgrind's callgrind) rather than timed.

    python benchmarks/instructions.py [--baseline PATH] [--turns 100] [--conversations 3]

On a shared machine a timing of the same code varies by ±30% from one run to the next; the
count of instructions it executes varies by ±0.2%. It is the measure to judge a change of a
few percent by (the time per turn stays the suite's measure of what a user gets).

The workload is the suite's turn rows: conversations of ``--turns`` turns of the built-in
agent, one idempotent tool call a turn, on a ``SqliteStore`` (at ``synchronous=OFF``: an
fsync costs time, not instructions, and under valgrind it would cost a great deal of it).
Each figure is the difference between a run of one conversation and a run of
``--conversations + 1``, divided by the turns between them, so start-up and imports cancel
out. ``--baseline`` counts another checkout of Tether in the same run (a ``git worktree`` of
an earlier commit): its library, this checkout's workload. Needs valgrind
(``apt-get install valgrind``); prints why it cannot run otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from benchmarks._table import print_table

ROOT = Path(__file__).resolve().parent.parent


async def _conversations(directory: Path, turns: int, count: int) -> None:
    """What the counted child runs: a warm-up conversation, then ``count`` of ``turns``."""
    from benchmarks.peers import tether_side
    from tether.store import SqliteStore

    async with await SqliteStore.open(directory, synchronous="OFF") as store:
        await tether_side._conversation(store, "warm-up", 10)
        for n in range(count):
            await tether_side._conversation(store, f"c{n}", turns)


def _counted(tree: Path, turns: int, count: int) -> int:
    """Instructions a child process executes running ``count`` conversations of ``turns``
    turns with the library of ``tree``."""
    with tempfile.TemporaryDirectory(prefix="tether-instructions-") as tmp:
        report = Path(tmp) / "callgrind.out"
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(tree / "src"), str(ROOT)]),
            PYTHONMALLOC="malloc",  # valgrind counts what the allocator does, not pymalloc's arenas
            PYTHONHASHSEED="0",
        )
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={report}",
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                tmp,
                str(turns),
                str(count),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"the counted run failed:\n{done.stdout}\n{done.stderr[-2000:]}")
        return int(found.group(1))


def per_turn(tree: Path, turns: int, conversations: int) -> float:
    one = _counted(tree, turns, 1)
    more = _counted(tree, turns, conversations + 1)
    return (more - one) / (turns * conversations)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", type=Path, help="another checkout of Tether to count")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--child", nargs=3, metavar=("DIR", "TURNS", "COUNT"), help="internal")
    args = parser.parse_args()
    if args.child:
        directory, turns, count = args.child
        asyncio.run(_conversations(Path(directory), int(turns), int(count)))
        return
    if shutil.which("valgrind") is None:
        print("instructions.py: valgrind is not installed (apt-get install valgrind)")
        return
    trees = {"this checkout": ROOT}
    if args.baseline is not None:
        trees[f"baseline ({args.baseline})"] = args.baseline.resolve()
    counts = {name: per_turn(tree, args.turns, args.conversations) for name, tree in trees.items()}
    rows = [[name, f"{count:,.0f}"] for name, count in counts.items()]
    if args.baseline is not None:
        ours, theirs = counts.values()
        rows.append(["change", f"{(ours - theirs) / theirs:+.1%}"])
    print_table(
        f"Instructions a turn (T={args.turns}, the built-in agent, one idempotent tool call a "
        f"turn, SqliteStore at synchronous=OFF; {args.conversations} conversations counted)",
        ("library", "instructions a turn"),
        rows,
    )


if __name__ == "__main__":
    main()
