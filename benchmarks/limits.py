"""What budgets and limits cost a turn, what a claim costs with limits at 2,000 queued, and
how exact a rate limit shared by 4 worker processes on PostgreSQL is (issue 41, item 5).

    python benchmarks/limits.py [--url postgresql://...] [--turns 300] [--queued 2000]
                                [--instructions] [--baseline PATH]
    python benchmarks/limits.py --turns 20 --queued 100 --seconds 2   # a CI smoke run

**CPU per turn**: a runtime on SQLite (and on PostgreSQL, given a database) settles
``--turns`` submissions, one zero-latency model call each, in as many sessions; the process's
CPU time (every thread's) per turn, median of ``--rounds`` rounds taken in turn: without a
budget or a limit, with a budget on the agent (checked before the call, counted after), with
a rate on the model (one grant per call, never refused), with a limit of runs in flight on
the agent (claims pass over what is at its limit; a slot taken and given back per run), a
tenant's runs with no budget and with a day budget. The goal: each under 5% of a turn's CPU;
and a tenant's day budget (its reservations: a worker's share of calls, given back by the
appends) under 5% over the same tenant's runs without one, in the same run.

**Instructions per turn** (``--instructions``, needs valgrind): the same turns on SQLite (at
``synchronous=OFF``: an fsync costs time, not instructions), each variant in a process of its
own under callgrind, the instructions it executes: a timing on a shared machine varies by
±30% from run to run. The count is no exact measure here either: the workload is concurrent
and paced by time (claim passes, the batches they claim, a lease's hold), and under callgrind
a turn takes some 50 times as long, so the same code counts ±3 points apart from one run to
the next, and a rate's leases, whose hold is wall time, cover far fewer calls than at full
speed: the count overstates what a rate costs. Read both. A variant's overhead is its count
less the baseline's (no budget, no limit) at ``--turns`` turns, over the baseline's
instructions per turn (the difference between its counts at ``--turns`` and at a fifth of
them: start-up cancels out). ``--baseline PATH``
also counts another checkout of Tether (an earlier commit's tree) with this workload, in the
same run: its overheads are the "before" column.

**A claim at 2,000 queued**: ``claim_runnable`` of one head, median ms over ``--claims``
claims, with ``--queued`` runnable heads (the older half of agent ``busy``): as before limits
(no ``held_back``: the statement is unchanged), holding back an agent with nothing queued
(the condition alone), and holding back ``busy`` (half the backlog passed over).

**A shared rate's accuracy**: 4 worker processes, each with ``--tasks`` tasks calling through
the engine's limit gate as fast as it lets them, share ``rate=(--rate, --per)`` on one key
for ``--seconds``; the grants' times (the clock each grant was decided on), in windows of
``--per`` seconds from the first: every whole window within 5% of the limit, and no window
of that length, wherever it starts, over it. Also shown: the same count by when each call
started (after the grant's round trip), what a provider would see.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
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

import psycopg
from psycopg import sql

from benchmarks._measure import LOCAL_POSTGRES, own_database, postgres_answers, told_postgres_url
from benchmarks._table import Goal, judged, print_goals, print_table
from tether.engine import (
    AgentDefinition,
    AgentSpec,
    Budget,
    Limits,
    Runtime,
    SystemClock,
    TenantBudget,
)
from tether.engine._limits import LimitGate
from tether.journal import Turn
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.store import (
    GrantTime,
    HeldBack,
    LimitAsk,
    NewSubmission,
    SessionKey,
    SqliteStore,
    Store,
    open_store,
)

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parent.parent
WORKERS = 4
GOAL_OVERHEAD = 0.05


class _OneCall:
    """One model call on the inputs: a turn as small as a turn gets."""

    name, version = "one-call", "1"

    async def run(self, turn: Turn) -> str:
        request = ModelRequest(model="bench:m", messages=tuple(turn.inputs))
        return (await turn.model(request)).message.text


def _definition(**policy: Any) -> AgentDefinition:
    spec = AgentSpec(harness=_OneCall(), model=ScriptedModel(lambda request: "ok"))
    return AgentDefinition(lambda instance, env: spec, **policy)


def _variants(turns: int) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each variant: the agent's policy, the runtime's settings."""
    return {
        "no budget, no limit": ({}, {}),
        "budget on the agent": ({"budget": Budget(model_calls=10, tokens=10**9)}, {}),
        "rate on the model": ({}, {"model_limits": {"bench": Limits(rate=(turns * 10, 60))}}),
        "runs in flight on the agent": ({"limits": Limits(concurrency=10**6)}, {}),
        # A tenant's runs: their usage is added up in the store with each completion (an
        # upsert in the append's commit; on PostgreSQL the append takes the checked path).
        "a tenant, no budget": ({}, {"tenant": "acme"}),
        # ... and reserved against its day budget before each call (from the worker's share
        # of calls, a store round trip per share; the completion's append gives it back).
        "a tenant's day budget": (
            {},
            {"tenant": "acme", "tenant_budgets": {"acme": TenantBudget(model_calls=10**9)}},
        ),
    }


async def _turn_cpu(store: Store, turns: int, policy: dict[str, Any], settings: Any) -> float:
    """CPU seconds per settled turn, the runtime's start and stop left out."""
    settings = dict(settings)
    tenant = settings.pop("tenant", None)
    async with Runtime(
        {"a": _definition(**policy)}, store, claim_interval=0.01, **settings
    ) as runtime:
        tag = uuid.uuid4().hex[:8]
        started = time.process_time()
        ids = [
            (await runtime.dispatch("a", tag, "go", session=f"s{n}", tenant=tenant)).submission_id
            for n in range(turns)
        ]
        for submission_id in ids:
            outcome = await runtime.wait(submission_id)
            assert outcome["status"] == "succeeded", outcome
        return (time.process_time() - started) / turns


@contextlib.asynccontextmanager
async def _pg_store(url: str) -> Any:
    schema = f"bench_limits_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in url else "?"
    store = await open_store(f"{url}{separator}schema={schema}")
    try:
        yield store
    finally:
        await store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextlib.asynccontextmanager
async def _store(backend: str, url: str | None, tmp: Path) -> Any:
    if backend == "sqlite":
        store = await SqliteStore.open(tmp / uuid.uuid4().hex)
        try:
            yield store
        finally:
            await store.close()
    else:
        assert url is not None
        async with _pg_store(url) as store:
            yield store


async def turn_section(
    args: argparse.Namespace, url: str | None, tmp: Path
) -> dict[str, dict[str, float]]:
    backends = ["sqlite", *(["postgres"] if url else [])]
    variants = _variants(args.turns)
    cpu: dict[str, dict[str, list[float]]] = {b: {v: [] for v in variants} for b in backends}
    for backend in backends:
        for _ in range(args.rounds):
            for name, (policy, settings) in variants.items():
                async with _store(backend, url, tmp) as store:
                    cpu[backend][name].append(await _turn_cpu(store, args.turns, policy, settings))
    medians = {b: {v: statistics.median(xs) for v, xs in by.items()} for b, by in cpu.items()}
    rows = []
    for backend, by in medians.items():
        base = by["no budget, no limit"]
        for name, value in by.items():
            extra = "" if value is base else f"{(value - base) / base:+.1%}"
            rows.append([backend, name, f"{value * 1e3:.3f}", extra])
    print_table(
        f"CPU per turn ({args.turns} turns, median of {args.rounds} rounds)",
        ["store", "variant", "CPU ms/turn", "vs none"],
        rows,
    )
    return medians


# --- instructions per turn ----------------------------------------------------------------


async def _counted_turns(directory: str, variant: str, turns: int) -> None:
    """What a counted child runs: ``turns`` turns of ``variant`` on a fresh SQLite store."""
    policy, settings = _variants(turns)[variant]
    async with await SqliteStore.open(Path(directory) / "store", synchronous="OFF") as store:
        await _turn_cpu(store, turns, policy, settings)


def _instructions(tree: Path, variant: str, turns: int) -> int:
    """Instructions a child process executes running ``turns`` turns of ``variant`` with the
    library of ``tree`` (this checkout's workload)."""
    with tempfile.TemporaryDirectory(prefix="tether-limits-count-") as tmp:
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(tree / "src"), str(ROOT)]),
            PYTHONMALLOC="malloc",  # valgrind counts the allocator's work, not pymalloc's arenas
            PYTHONHASHSEED="0",
        )
        child = [sys.executable, str(SCRIPT), "--count-child", tmp, variant, str(turns)]
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/callgrind.out", *child],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or found is None:
            raise RuntimeError(f"the counted run failed:\n{done.stderr[-2000:]}")
        return int(found.group(1))


def instruction_overheads(tree: Path, turns: int) -> tuple[float, dict[str, float]]:
    """``tree``'s baseline instructions per turn, and each variant's overhead over it."""
    variants = list(_variants(turns))
    base = variants[0]
    few = max(turns // 5, 1)
    at_turns = {name: _instructions(tree, name, turns) for name in variants}
    per_turn = (at_turns[base] - _instructions(tree, base, few)) / (turns - few)
    overheads = {
        name: (count - at_turns[base]) / turns / per_turn
        for name, count in at_turns.items()
        if name != base
    }
    return per_turn, overheads


def instruction_section(args: argparse.Namespace) -> list[Goal]:
    if shutil.which("valgrind") is None:
        print("limits.py: --instructions needs valgrind (apt-get install valgrind)")
        return [Goal("instructions per turn", "skipped: no valgrind", None)]
    trees = {"this checkout": ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    found = {label: instruction_overheads(tree, args.turns) for label, tree in trees.items()}
    names = list(found["this checkout"][1])
    header = ["variant", *(f"{label}: vs none" for label in found)]
    rows = [
        ["no budget, no limit (instructions/turn)", *(f"{pt:,.0f}" for pt, _ in found.values())]
    ]
    rows += [[name, *(f"{by[name]:+.2%}" for _, by in found.values())] for name in names]
    print_table(f"Instructions per turn on SQLite (callgrind, {args.turns} turns)", header, rows)
    ours = found["this checkout"][1]
    before = found.get("baseline")
    goals = []
    # The budget's own cost: a tenant's day budget over the same tenant's runs without one.
    tenant, budgeted = "a tenant, no budget", "a tenant's day budget"
    if tenant in ours and budgeted in ours:
        measured = f"{ours[budgeted] - ours[tenant]:+.2%}"
        if before is not None and tenant in before[1] and budgeted in before[1]:
            measured += f" (baseline {before[1][budgeted] - before[1][tenant]:+.2%})"
        goals.append(
            Goal(
                "a tenant's day budget over a tenant with none (sqlite, instructions) "
                "under 5% of a turn's",
                measured,
                judged(ours[budgeted] - ours[tenant] < GOAL_OVERHEAD, args.turns >= 100),
            )
        )
    for name in names:
        measured = f"{ours[name]:+.2%}"
        if before is not None:
            measured += f" (baseline {before[1][name]:+.2%})"
        goals.append(
            Goal(
                f"{name} (sqlite, instructions) under 5% of a turn's",
                measured,
                judged(ours[name] < GOAL_OVERHEAD, args.turns >= 100),
            )
        )
    return goals


# --- claims at a backlog ----------------------------------------------------------------


async def _claim_ms(store: Store, queued: int, claims: int, held: HeldBack | None) -> float:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(queued):
        agent = "busy" if n < queued // 2 else "support"
        key = SessionKey(agent, "i", f"s{n}")
        await store.admit(NewSubmission(f"sub-{n:06d}", key, f"conv-{n:06d}", {"kind": "user"}, t0))
    limited: Any = store
    timings = []
    for n in range(claims):
        started = time.perf_counter()
        got = await limited.claim_runnable(
            attempt_ids=[f"att-{n}"],
            owner_id="w",
            lease_expires_at=t0 + timedelta(seconds=60),
            now=t0,
            **({"held_back": held} if held is not None else {}),
        )
        timings.append(time.perf_counter() - started)
        assert len(got) == 1
    return statistics.median(timings) * 1e3


async def claim_section(
    args: argparse.Namespace, url: str | None, tmp: Path
) -> dict[str, dict[str, float]]:
    cases = {
        "before limits (no held_back)": None,
        "held back: an agent with none queued": HeldBack(agents=frozenset({"other"})),
        "held back: the older half's agent": HeldBack(agents=frozenset({"busy"})),
    }
    timings: dict[str, dict[str, list[float]]] = {}
    for backend in ["sqlite", *(["postgres"] if url else [])]:
        for _ in range(args.rounds):  # the cases in turn, round after round: drift hits all
            for name, held in cases.items():
                async with _store(backend, url, tmp) as store:
                    ms = await _claim_ms(store, args.queued, args.claims, held)
                timings.setdefault(backend, {}).setdefault(name, []).append(ms)
    results = {
        backend: {name: statistics.median(ms) for name, ms in by.items()}
        for backend, by in timings.items()
    }
    rows = [[b, name, f"{ms:.3f}"] for b, by in results.items() for name, ms in by.items()]
    print_table(
        f"A claim of one head at {args.queued} queued (median of {args.claims} claims, "
        f"median of {args.rounds} rounds)",
        ["store", "claim", "ms"],
        rows,
    )
    return results


# --- a shared rate across processes -----------------------------------------------------


async def _child(store_url: str, rate: int, per: float, seconds: float, tasks: int) -> None:
    """One worker process: ``tasks`` tasks calling through the gate until ``seconds`` pass;
    prints the grants' times and the calls' start times, as JSON."""
    store: Any = await open_store(store_url)
    leases: dict[str, list[float]] = {}  # by holder: the grant time of each permit it holds
    starts: list[float] = []
    acquire, release = store.acquire_limit, store.release_limit

    async def spied(ask: LimitAsk, *, now: GrantTime) -> datetime | None:
        read: list[datetime] = []

        def reading() -> datetime:  # the time the store decided at
            read.append(now() if callable(now) else now)
            return read[-1]

        retry_at: datetime | None = await acquire(ask, now=reading)
        if retry_at is None:  # a lease of several permits: each counted at its grant
            leases.setdefault(ask.holder, []).extend([read[-1].timestamp()] * ask.calls)
        return retry_at

    async def given_back(key: str, *, holder: str, calls: int = 0) -> None:
        await release(key, holder=holder, calls=calls)
        if calls:  # a lease's unspent permits: no longer counted (nor ever spent)
            del leases[holder][:calls]

    store.acquire_limit, store.release_limit = spied, given_back
    clock = SystemClock()
    gate = LimitGate(
        store,
        agent_limits={},
        tenant_limits={},
        model_limits={"bench": Limits(rate=(rate, per))},
        clock=clock,
        owner_id=f"bench-{os.getpid()}",
        lease=30.0,
        poll=1.0,
    )
    deadline = time.time() + seconds

    async def calls() -> None:
        while time.time() < deadline:
            async with gate.call("bench:m", "a", None):
                starts.append(time.time())

    try:
        await asyncio.gather(*(calls() for _ in range(tasks)))
    finally:
        await store.close()
    grants = [at for permits in leases.values() for at in permits]
    print(json.dumps({"grants": grants, "starts": starts}))


def _windows(times: list[float], start: float, per: float, end: float) -> list[int]:
    """Calls in each whole window of ``per`` seconds from ``start`` up to ``end``."""
    count = int((end - start) // per)
    return [sum(start + k * per <= t < start + (k + 1) * per for t in times) for k in range(count)]


def _max_sliding(times: list[float], per: float) -> int:
    ordered = sorted(times)
    best, low = 0, 0
    for high, at in enumerate(ordered):
        while ordered[low] <= at - per:
            low += 1
        best = max(best, high - low + 1)
    return best


def _run_workers(command: list[str], env: dict[str, str], timeout: float) -> list[str]:
    """Start the :data:`WORKERS` processes at once; each one's output."""
    workers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, env=env, text=True)
        for _ in range(WORKERS)
    ]
    try:
        outputs = [worker.communicate(timeout=timeout)[0] for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    for worker in workers:
        assert worker.returncode == 0, f"a worker failed (exit {worker.returncode})"
    return outputs


async def rate_section(args: argparse.Namespace, url: str) -> tuple[list[int], int, int]:
    schema = f"bench_limits_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in url else "?"
    store_url = f"{url}{separator}schema={schema}"
    store = await open_store(store_url)  # migrated once, before the workers open it
    await store.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    command = [
        sys.executable,
        str(SCRIPT),
        "--child",
        store_url,
        str(args.rate),
        str(args.per),
        str(args.seconds),
        str(args.tasks),
    ]
    try:
        outputs = await asyncio.to_thread(_run_workers, command, env, args.seconds + 120)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    found = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    grants = sorted(t for f in found for t in f["grants"])
    starts = sorted(t for f in found for t in f["starts"])
    first, last = grants[0], grants[-1]
    windows = _windows(grants, first, args.per, last)
    by_start = _windows(starts, starts[0], args.per, starts[-1])
    sliding, sliding_start = _max_sliding(grants, args.per), _max_sliding(starts, args.per)
    print_table(
        f"A shared rate of {args.rate} per {args.per:g} s: {WORKERS} worker processes x "
        f"{args.tasks} tasks on PostgreSQL, {args.seconds:g} s",
        ["counted by", "calls", "per whole window", "max in any window", "limit"],
        [
            ["grant", str(len(grants)), " ".join(map(str, windows)), str(sliding), str(args.rate)],
            [
                "call start",
                str(len(starts)),
                " ".join(map(str, by_start)),
                str(sliding_start),
                str(args.rate),
            ],
        ],
    )
    return windows, sliding, sliding_start


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="a PostgreSQL database to make schemas in")
    parser.add_argument("--turns", type=int, default=300, help="turns per variant and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queued", type=int, default=2000)
    parser.add_argument("--claims", type=int, default=50)
    parser.add_argument("--rate", type=int, default=100, help="calls per window (shared)")
    parser.add_argument("--per", type=float, default=2.0, help="the rate's window, seconds")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the 4 workers call")
    parser.add_argument("--tasks", type=int, default=8, help="calling tasks per worker")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count each variant's instructions per turn (callgrind; minutes)",
    )
    parser.add_argument(
        "--baseline", type=Path, help="with --instructions: another checkout of Tether to count"
    )
    parser.add_argument(
        "--turns-only",
        action="store_true",
        help="measure the turns (and count their instructions) only: no claims, no shared rate",
    )
    return parser


async def main(args: argparse.Namespace) -> None:
    told = args.url or told_postgres_url()
    database: contextlib.AbstractContextManager[str | None]
    if told is not None:
        database = contextlib.nullcontext(told)
    elif postgres_answers(LOCAL_POSTGRES):
        database = own_database(LOCAL_POSTGRES)
    else:  # no local server: SQLite only
        database = contextlib.nullcontext(None)
    goals: list[Goal] = []
    judge = args.turns >= 200
    with tempfile.TemporaryDirectory(prefix="tether-limits-") as tmp, database as url:
        turns = await turn_section(args, url, Path(tmp))
        if args.instructions:
            goals += await asyncio.to_thread(instruction_section, args)
        for backend, by in turns.items():
            base = by["no budget, no limit"]
            for name, value in by.items():
                if value is base:
                    continue
                overhead = (value - base) / base
                goals.append(
                    Goal(
                        f"{name} ({backend}) under 5% of a turn's CPU",
                        f"{overhead:+.1%}",
                        judged(overhead < GOAL_OVERHEAD, judge),
                    )
                )
            # What the budget itself costs: its reservations, over the same tenant's runs
            # with no budget (whose usage the appends add up either way).
            without, budgeted = by["a tenant, no budget"], by["a tenant's day budget"]
            overhead = (budgeted - without) / without
            goals.append(
                Goal(
                    f"a tenant's day budget over a tenant with none ({backend}) "
                    "under 5% of a turn's CPU",
                    f"{overhead:+.1%}",
                    judged(overhead < GOAL_OVERHEAD, judge),
                )
            )
        if args.turns_only:
            print_goals(goals)
            return
        claims = await claim_section(args, url, Path(tmp))
        for backend, by in claims.items():
            before = by["before limits (no held_back)"]
            held = by["held back: an agent with none queued"]
            goals.append(
                Goal(
                    f"a claim at {args.queued} queued with a limit's condition ({backend}) "
                    "within 10% of one without",
                    f"{held:.3f} ms vs {before:.3f} ms",
                    judged(held <= before * 1.10, args.queued >= 2000),
                )
            )
        if url is None:
            goals.append(Goal("a shared rate on PostgreSQL", "skipped: no PostgreSQL", None))
        else:
            windows, sliding, _ = await rate_section(args, url)
            whole = bool(windows) and all(
                args.rate * 0.95 <= count <= args.rate for count in windows
            )
            long_enough = args.seconds >= 4 * args.per
            goals.append(
                Goal(
                    f"every whole window within 5% of the rate ({args.rate}), 4 workers",
                    " ".join(map(str, windows)) or "no whole window",
                    # A throughput goal, judged on a full run only; a window over the rate is
                    # a bug at any size, judged on a smoke run too.
                    judged(whole, long_enough and judge),
                )
            )
            goals.append(
                Goal(
                    "no window of the rate's length over it (by grant)",
                    f"max {sliding} of {args.rate}",
                    judged(sliding <= args.rate, long_enough),
                )
            )
    print_goals(goals)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--count-child"]:
        directory, variant, turns = sys.argv[2:5]
        asyncio.run(_counted_turns(directory, variant, int(turns)))
    elif sys.argv[1:2] == ["--child"]:
        url, rate, per, seconds, tasks = sys.argv[2:7]
        asyncio.run(_child(url, int(rate), float(per), float(seconds), int(tasks)))
    else:
        asyncio.run(main(_parser().parse_args()))
