"""The CPU a turn costs, counted in instructions (valgrind's callgrind) rather than timed.

    python benchmarks/instructions.py [--baseline PATH] [--turns 100] [--conversations 2]
                                      [--requests 100]

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

``--requests N`` also counts the served path as users run it: the ``tether serve --demo``
process (the console script, default settings, a SQLite store), answering one
``POST /agents/assistant/<session>?wait=true`` at a time, the difference between runs of 10
and ``10 + N`` requests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import httpx

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


def _valgrind(report: Path, command: list[str]) -> list[str]:
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={report}", *command]


def _environment(tree: Path) -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(tree / "src"), str(ROOT)]),
        PYTHONMALLOC="malloc",  # valgrind counts what the allocator does, not pymalloc's arenas
        PYTHONHASHSEED="0",
    )


def _collected(output: str) -> int:
    found = re.search(r"Collected : (\d+)", output)
    if found is None:
        raise RuntimeError(f"the counted run reported no count:\n{output[-2000:]}")
    return int(found.group(1))


def count_child(script: Path, tree: Path, *arguments: str) -> int:
    """Instructions ``script --child <a scratch folder> arguments...`` executes as a child
    process under callgrind, with the library of ``tree``."""
    with tempfile.TemporaryDirectory(prefix="tether-instructions-") as tmp:
        child = [sys.executable, str(script.resolve()), "--child", tmp, *arguments]
        done = subprocess.run(
            _valgrind(Path(tmp) / "callgrind.out", child),
            env=_environment(tree),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the counted run failed:\n{done.stdout}\n{done.stderr[-2000:]}")
        return _collected(done.stderr)


def _counted(tree: Path, turns: int, count: int) -> int:
    """Instructions a child process executes running ``count`` conversations of ``turns``
    turns with the library of ``tree``."""
    return count_child(Path(__file__), tree, str(turns), str(count))


def _served(tree: Path, requests: int) -> int:
    """Instructions ``tether serve --demo`` (``tree``'s library) executes from its start to
    its stop, answering ``requests`` requests one at a time."""
    with tempfile.TemporaryDirectory(prefix="tether-instructions-") as tmp, socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        tether = Path(sys.executable).with_name("tether")  # the console script users run
        serve = [sys.executable, str(tether), "serve", "--demo", "--store", f"sqlite:///{tmp}/d"]
        log = Path(tmp) / "server.log"
        with log.open("wb") as out:
            server = subprocess.Popen(
                _valgrind(
                    Path(tmp) / "cg.out", [*serve, "--host", "127.0.0.1", "--port", str(port)]
                ),
                env=_environment(tree),
                cwd=tmp,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            try:
                url = f"http://127.0.0.1:{port}"
                deadline = time.monotonic() + 600  # start-up under valgrind takes a minute
                while not _healthy(url):
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"the server did not start:\n{log.read_text()[-2000:]}")
                    time.sleep(0.5)
                with httpx.Client(base_url=url, timeout=600) as client:
                    for n in range(requests):
                        answer = client.post(
                            f"/agents/assistant/s-{n % 64}",
                            params={"wait": "true"},
                            json={"body": "hello"},
                        )
                        if answer.status_code != 200 or answer.json()["status"] != "succeeded":
                            raise RuntimeError(f"request {n}: {answer.status_code} {answer.text}")
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(600)
        return _collected(log.read_text(errors="replace"))


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:  # not listening yet
        return False


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
    parser.add_argument("--requests", type=int, default=0, help="also count the served path")
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
    _print_counts(
        f"Instructions a turn (T={args.turns}, the built-in agent, one idempotent tool call a "
        f"turn, SqliteStore at synchronous=OFF; {args.conversations} conversations counted)",
        "instructions a turn",
        counts,
    )
    if args.requests:
        served = {
            name: (_served(tree, 10 + args.requests) - _served(tree, 10)) / args.requests
            for name, tree in trees.items()
        }
        _print_counts(
            f"Instructions a request of tether serve --demo ({args.requests} requests counted, "
            "one at a time, POST /agents/assistant/<session>?wait=true)",
            "instructions a request",
            served,
        )


def _print_counts(title: str, unit: str, counts: dict[str, float]) -> None:
    """One row a library, and the change from the baseline (the second) if there is one."""
    rows = [[name, f"{count:,.0f}"] for name, count in counts.items()]
    if len(counts) == 2:
        ours, theirs = counts.values()
        rows.append(["change", f"{(ours - theirs) / theirs:+.1%}"])
    print_table(title, ("library", unit), rows)


if __name__ == "__main__":
    main()
