"""What one PostgreSQL claim reads and costs with a backlog queued, before and after a change
to the claim's order (docs/priorities.md).

    python benchmarks/pg_claim.py [--url postgresql://...] [--baseline PATH] [--queued 2000]
                                  [--claims 200]

Per checkout (this one, and ``--baseline``, another checkout's ``src`` run by the same
script) and per backlog: a fresh schema, ``--queued`` submissions admitted in as many
sessions (each a runnable head), ``ANALYZE``d; then

- the claim statement's plan under ``EXPLAIN (ANALYZE, BUFFERS)``, in a transaction rolled
  back (the claim it made is undone): which index the heads are read from, how many rows
  it read, and the shared buffers it touched, for one head, for a batch of 32, and for one
  head with ``serves`` (a versioned worker's claim, ``{"support": ["v1"]}``: the rows its
  heads scan returned say whether it read the heads in order and stopped, or read them all);
- ``--claims`` claims of one head each (``claim_runnable`` x1, a commit each), timed: the
  median and p90 in milliseconds. Timings on a shared machine vary by tens of percent; the
  buffers do not.

The ``priorities`` backlog (this checkout only, or any checkout whose ``NewSubmission`` has
``priority``) admits the submissions at eleven priorities in turn (-5 to 5), so claims take
heads out of admission order. The schemas are made in the database ``--url`` names, else
``TETHER_BENCH_POSTGRES_URL`` or ``TETHER_TEST_POSTGRES_URL``, and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
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
T0 = datetime(2026, 1, 1, tzinfo=UTC)
BATCH = 32


def _url(base: str, schema: str) -> str:
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def _explained(plan: dict[str, Any]) -> tuple[int, list[str], int]:
    """Shared buffers hit and read, the indexes scanned on ``submissions``, and the rows the
    first of those scans returned."""
    indexes: list[str] = []
    rows: list[int] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "submissions" and "Index Name" in node:
            indexes.append(node["Index Name"])
            rows.append(int(node.get("Actual Rows", 0)) * int(node.get("Actual Loops", 1)))
        for child in node.get("Plans", ()):
            walk(child)

    top = plan["Plan"]
    walk(top)
    buffers = int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    return buffers, indexes, rows[0] if rows else 0


async def _child(base: str, queued: int, claims: int, mode: str) -> dict[str, Any]:
    """What each counted checkout runs (its ``src`` first on the path)."""
    import psycopg
    from psycopg import sql

    from tether.store import NewSubmission, SessionKey
    from tether.store.postgres import PostgresStore
    from tether.store.postgres import _submissions as pg

    prioritized = mode == "priorities" and any(
        field.name == "priority" for field in dataclasses.fields(NewSubmission)
    )
    schema = f"bench_claim_{uuid.uuid4().hex[:12]}"
    url = _url(base, schema)
    lease = T0 + timedelta(hours=1)
    try:
        async with await PostgresStore.open(url) as store:
            for n in range(queued):
                new = NewSubmission(
                    f"sub-{n:05d}",
                    SessionKey("support", "i", f"s{n}"),
                    f"conv-{n:05d}",
                    {"kind": "user"},
                    T0 + timedelta(milliseconds=n),
                )
                if prioritized:
                    new = dataclasses.replace(new, priority=n % 11 - 5)
                await store.admit(new)
        result: dict[str, Any] = {}
        async with await psycopg.AsyncConnection.connect(base) as conn:
            await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            await conn.execute("ANALYZE submissions")
            await conn.commit()
            for name, size, versioned in (("x1", 1, 0), ("x32", BATCH, 0), ("v1", 1, 1)):
                params = {
                    "n": size,
                    "attempt_ids": json.dumps([f"explain-{k}" for k in range(size)]),
                    "owner": "w",
                    "now": T0,
                    "lease": lease,
                    "serves": json.dumps({"support": ["v1"]}),
                }
                samples = []
                for _ in range(5):
                    cursor = await conn.execute(
                        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + pg._CLAIM_HEADS[versioned],
                        params,
                    )
                    row = await cursor.fetchone()
                    assert row is not None
                    samples.append(_explained(row[0][0]))
                    await conn.rollback()
                buffers, indexes, rows = samples[-1]  # warm
                result[name] = {"buffers": buffers, "indexes": indexes, "rows": rows}
        async with await PostgresStore.open(url) as store:
            times = []
            for k in range(claims):
                started = time.perf_counter()
                got = await store.claim_runnable(
                    attempt_ids=[f"att-{k}"], owner_id="w", lease_expires_at=lease, now=T0
                )
                times.append(time.perf_counter() - started)
                assert len(got) == 1
            times.sort()
            result["ms"] = {
                "p50": statistics.median(times) * 1000,
                "p90": times[int(len(times) * 0.9)] * 1000,
            }
        return result
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def _run(tree: Path, base: str, queued: int, claims: int, mode: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree / "src"), str(ROOT)]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    child = [sys.executable, str(Path(__file__).resolve()), "--child", base, str(queued)]
    done = subprocess.run(
        [*child, str(claims), mode], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the measured run failed:\n{done.stderr[-2000:]}")
    measured: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="the database to make the schemas in")
    parser.add_argument("--baseline", type=Path, help="another checkout of Tether to measure")
    parser.add_argument("--queued", type=int, default=2000)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--child", nargs=4, metavar=("URL", "QUEUED", "CLAIMS", "MODE"))
    args = parser.parse_args()
    if args.child:
        base, queued, claims, mode = args.child
        print(json.dumps(asyncio.run(_child(base, int(queued), int(claims), mode))))
        return
    base = (
        args.url
        or os.environ.get("TETHER_BENCH_POSTGRES_URL")
        or os.environ.get("TETHER_TEST_POSTGRES_URL")
    )
    if base is None:
        parser.error("no database: give --url, or set TETHER_BENCH_POSTGRES_URL")
    if args.claims >= args.queued:
        parser.error("--claims must be under --queued: every claim takes a queued head")
    runs = []
    if args.baseline is not None:
        runs.append(("baseline", args.baseline, "plain"))
    runs += [("this checkout", ROOT, "plain"), ("this checkout", ROOT, "priorities")]
    print(f"One PostgreSQL claim, {args.queued} queued heads ({args.claims} claims timed)")
    header = f"  {'checkout, backlog':<30} {'heads read from':<28} {'rows x1':>7} "
    columns = f"{'bufs x1':>8} {'bufs x32':>9} {'rows v1':>7} {'bufs v1':>8}"
    print(header + columns + f" {'p50 ms':>7} {'p90 ms':>7}")
    for name, tree, mode in runs:
        got = _run(tree, base, args.queued, args.claims, mode)
        index = got["x1"]["indexes"][0] if got["x1"]["indexes"] else "-"
        print(
            f"  {name + ', ' + mode:<30} {index:<28} {got['x1']['rows']:>7} "
            f"{got['x1']['buffers']:>8} {got['x32']['buffers']:>9} "
            f"{got['v1']['rows']:>7} {got['v1']['buffers']:>8} "
            f"{got['ms']['p50']:>7.2f} {got['ms']['p90']:>7.2f}"
        )


if __name__ == "__main__":
    main()
