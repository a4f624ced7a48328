"""The instructions a claim costs on SQLite, counted under callgrind, with and without
``serves`` (one agent, one version), and with the backlog's priorities mixed.

    python benchmarks/store_claim.py [--baseline PATH] [--sessions 700]

What ``SqliteStore.claim_runnable`` runs for one head (its lock-free hint read, then the
claim's transaction), on one thread: the schema migrated and N sessions admitted through
the store's own SQL functions, no event loop and no writer thread (whose hand-offs vary with
timing under valgrind, so the count would too). Each figure is the difference between runs
of C1 and C2 claims, divided by the claims between them. ``--baseline`` counts another
checkout (an earlier commit's ``git worktree``) without ``serves``, which it may predate.
The ``priorities`` row admits the backlog with eleven priorities (-5 to 5, in turn), so
claims take heads out of admission order (docs/priorities.md); a checkout without
priorities admits every one at 0. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

ROOT = Path(__file__).resolve().parent.parent
SESSIONS, C1, C2 = 700, 50, 650


def _claims(directory: Path, claims: int, mode: str, sessions: int) -> None:
    """What the counted child runs."""
    import dataclasses

    from tether.store import NewSubmission, SessionKey
    from tether.store import _sqlite_submissions as sql
    from tether.store._sqlite_schema import connect, migrate

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    path = directory / "tether.db"
    conn = connect(path, synchronous="OFF", busy_timeout=5.0)
    migrate(conn, 5.0)
    versioned = mode == "versioned"
    prioritized = mode == "priorities" and any(
        field.name == "priority" for field in dataclasses.fields(NewSubmission)
    )
    conn.execute("BEGIN IMMEDIATE")
    for n in range(sessions):
        key = SessionKey("support", "i", f"s{n}")
        new = NewSubmission(f"sub-{n:05d}", key, f"conv-{n:05d}", {"kind": "user"}, t0)
        if prioritized:
            new = dataclasses.replace(new, priority=n % 11 - 5)
        sql.admit(conn, new, [])
    conn.execute("COMMIT")
    reader = connect(path, synchronous="OFF", busy_timeout=5.0)
    lease = t0 + timedelta(seconds=60)
    serves: Any = {"support": ["v1"]} if versioned else None
    extra = {"serves": serves} if versioned else {}
    has = getattr(sql, "has_runnable", None)  # the hint each checkout's store reads first
    for n in range(claims):
        if versioned:
            from tether.store._versions import check_serves

            check_serves(serves)
        assert has(reader, serves) if has is not None else sql.list_runnable(reader, 1)
        conn.execute("BEGIN IMMEDIATE")
        got = sql.claim_runnable(conn, [f"att-{n}"], "w", lease, t0, **extra)
        conn.execute("COMMIT")
        assert len(got) == 1


def _counted(tree: Path, claims: int, mode: str, sessions: int) -> int:
    with tempfile.TemporaryDirectory(prefix="tether-claims-") as tmp:
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(tree / "src"), str(ROOT)]),
            PYTHONMALLOC="malloc",
            PYTHONHASHSEED="0",
        )
        child = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            tmp,
            str(claims),
            mode,
            str(sessions),
        ]
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/callgrind.out",
                *child,
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"the counted run failed:\n{done.stderr[-2000:]}")
        return int(found.group(1))


def per_claim(tree: Path, mode: str, sessions: int) -> float:
    return (_counted(tree, C2, mode, sessions) - _counted(tree, C1, mode, sessions)) / (C2 - C1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", type=Path, help="another checkout of Tether to count")
    parser.add_argument(
        "--sessions", type=int, default=SESSIONS, help=f"queued sessions (> {C2}; {SESSIONS})"
    )
    parser.add_argument(
        "--child", nargs=4, metavar=("DIR", "CLAIMS", "MODE", "SESSIONS"), help="internal"
    )
    args = parser.parse_args()
    if args.child:
        directory, claims, mode, sessions = args.child
        _claims(Path(directory), int(claims), mode, int(sessions))
        return
    if args.sessions <= C2:
        parser.error(f"--sessions must be over {C2}: every claim takes a queued head")
    if shutil.which("valgrind") is None:
        print("store_claim.py: valgrind is not installed (apt-get install valgrind)")
        return
    rows = []
    n = args.sessions
    if args.baseline is not None:
        baseline = args.baseline
        rows.append((f"baseline ({baseline}), serves=None", per_claim(baseline, "plain", n)))
        rows.append((f"baseline ({baseline}), serves=v1", per_claim(baseline, "versioned", n)))
    rows.append(("this checkout, serves=None", per_claim(ROOT, "plain", n)))
    rows.append(('this checkout, serves={"support": ["v1"]}', per_claim(ROOT, "versioned", n)))
    rows.append(("this checkout, priorities -5..5", per_claim(ROOT, "priorities", n)))
    print(f"Instructions a claim (SQLite, {n} queued sessions, one head a claim)")
    for name, count in rows:
        print(f"  {name:<48} {count:>12,.0f}")


if __name__ == "__main__":
    main()
