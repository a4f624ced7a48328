"""HTTP: a real ``tether serve`` beside the floor of a durable endpoint, at 1, 8 and 64 clients.

    python benchmarks/http.py [--clients 1 8 64] [--seconds 10] [--warmup 2] [--sessions 512]
    python benchmarks/http.py --clients 1 8 64 --seconds 0.3 --warmup 0.1   # a CI smoke run

Starts two servers in child processes, each on a free port of 127.0.0.1, and keeps both up for
the whole run:

- ``tether serve --demo --store sqlite:///<scratch>`` as a user starts it (the console
  script, default settings: the CLI's heap freeze, uvicorn quiet). The demo's echo model
  answers at once and a plain "hello" calls no tool, so what is measured is Tether's own
  work: admission, claim, the journal's appends, settlement, the wait;
- the floor, ``python -m uvicorn benchmarks._floor_app:app`` (same uvicorn, same log level):
  FastAPI with the same route, one ``INSERT`` committed per request into a SQLite WAL file
  at ``synchronous=FULL``, JSON back.

For each number of clients (``--clients``), one server after the other, ``--warmup`` seconds
that are not counted, then ``--seconds`` measured: N httpx clients (one connection each) in
this process send ``POST /agents/assistant/<instance>?wait=true`` with ``{"body": "hello"}``,
each its next request once the last is answered. Request n goes to instance
``n % --sessions`` (a set per level), so concurrent requests are on different sessions (a
session runs one submission at a time) and no conversation grows long. Server CPU is the
process's utime + stime from ``/proc/<pid>/stat`` read before and after the measured
seconds, divided by the requests answered in them; the clients' CPU is this process's.

Goals (issue 19): server CPU per request at most 3x the floor's; requests/s at 64 clients at
least half the floor's. The machine is shared and the clients run on it too (see the client
CPU column), so the figures are indicative; the goals are judged only with at least 5
measured seconds per level.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder heads sys.path, and this file (http.py) would then
    # stand in for the standard library's http package, which httpx imports.
    _here = os.path.realpath(Path(__file__).parent)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != _here]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import asyncio
import contextlib
import itertools
import signal
import socket
import ssl
import statistics
import subprocess
import time
from dataclasses import dataclass

import httpx

from benchmarks._measure import percentile, scratch
from benchmarks._table import Goal, judged, print_goals, print_table

ROOT = Path(__file__).resolve().parent.parent
CPU_GOAL = 3.0  # server CPU per request, at most this times the floor's
RATE_GOAL = 0.5  # requests/s at 64 clients, at least this times the floor's
RATE_GOAL_CLIENTS = 64
JUDGED_SECONDS = 5.0  # fewer measured seconds per level: the goals are not judged
READY_SECONDS = 120.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from ``/proc/<pid>/stat`` (Linux)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14 and 15 of proc(5)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} was not ready in {READY_SECONDS:.0f} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)


def start_tether(directory: Path) -> Server:
    """``tether serve --demo`` as a user starts it: the console script, default settings."""
    port, log = _free_port(), directory / "tether.log"
    tether = Path(sys.executable).with_name("tether")
    command = [str(tether)] if tether.exists() else [sys.executable, "-m", "tether.cli"]
    process = subprocess.Popen(
        [
            *command,
            "serve",
            "--demo",
            "--store",
            f"sqlite:///{directory / 'tether-data'}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    return Server("tether serve", process, f"http://127.0.0.1:{port}", log)


def start_floor(directory: Path) -> Server:
    """The floor app under uvicorn, at the log level ``tether serve`` gives uvicorn."""
    port, log = _free_port(), directory / "floor.log"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "benchmarks._floor_app:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, "TETHER_FLOOR_DB": str(directory / "floor.db")},
    )
    return Server("floor", process, f"http://127.0.0.1:{port}", log)


@dataclass
class Level:
    """One server at one number of clients."""

    requests: int
    seconds: float
    latencies: list[float]  # seconds
    server_cpu: float  # seconds
    client_cpu: float  # seconds
    unsettled: int  # answered 202: not settled within the server's wait (60 s)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def per_request(self, cpu: float) -> float:
        return cpu / self.requests if self.requests else 0.0


async def measure(
    server: Server, clients: int, *, seconds: float, warmup: float, sessions: int
) -> Level:
    """``clients`` clients for ``warmup`` seconds, then ``seconds`` measured."""
    numbers = itertools.count()
    prefix = f"n{clients}"
    failures: list[str] = []
    unsettled: list[str] = []
    # A client of its own for each (one connection each): one shared pool of 64 connections
    # costs httpx several times the CPU a request, and this process is on the same machine.
    # (Plain HTTP; one TLS context for all: httpx would load the CA bundle for each client.)
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    tls = ssl.create_default_context()
    async with contextlib.AsyncExitStack() as stack:
        pool = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits, verify=tls)
            )
            for _ in range(clients)
        ]

        async def loop(client: httpx.AsyncClient, until: float, latencies: list[float]) -> None:
            while time.perf_counter() < until and not failures:
                n = next(numbers)
                start = time.perf_counter()
                response = await client.post(
                    f"/agents/assistant/{prefix}-{n % sessions}",
                    params={"wait": "true"},
                    json={"body": "hello"},
                )
                latencies.append(time.perf_counter() - start)
                if response.status_code == 202:  # still queued or running after the wait
                    unsettled.append(response.text[:200])
                elif response.status_code != 200 or response.json().get("status") != "succeeded":
                    failures.append(f"{response.status_code} {response.text[:200]}")

        async def phase(length: float) -> list[float]:
            latencies: list[float] = []
            until = time.perf_counter() + length
            async with asyncio.TaskGroup() as group:
                for client in pool:
                    group.create_task(loop(client, until, latencies))
            return latencies

        if warmup > 0:
            await phase(warmup)
        unsettled.clear()
        cpu, client_cpu = cpu_seconds(server.process.pid), time.process_time()
        start = time.perf_counter()
        latencies = await phase(seconds)
        elapsed = time.perf_counter() - start
        level = Level(
            requests=len(latencies),
            seconds=elapsed,
            latencies=latencies,
            server_cpu=cpu_seconds(server.process.pid) - cpu,
            client_cpu=time.process_time() - client_cpu,
            unsettled=len(unsettled),
        )
    if failures:
        raise RuntimeError(f"{server.name}: {len(failures)} requests failed, e.g. {failures[0]}")
    if unsettled:
        print(
            f"warning: {server.name}, {clients} clients: {len(unsettled)} submissions not "
            f"settled within the wait, e.g. {unsettled[0]}",
            flush=True,
        )
    return level


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


METRICS = (
    ("requests/s", "{:,.0f}"),
    ("p50 ms", "{:.2f}"),
    ("p99 ms", "{:.2f}"),
    ("server CPU ms/request", "{:.3f}"),
    ("client CPU ms/request", "{:.3f}"),
)


def figures(level: Level) -> list[float]:
    """The figures of :data:`METRICS`, in order."""
    return [
        level.rate,
        statistics.median(level.latencies) * 1000 if level.latencies else 0.0,
        percentile(level.latencies, 0.99) * 1000 if level.latencies else 0.0,
        level.per_request(level.server_cpu) * 1000,
        level.per_request(level.client_cpu) * 1000,
    ]


def report(levels: dict[int, dict[str, Level]], seconds: float, sessions: int, judge: bool) -> None:
    rows: list[list[str]] = []
    for clients, by_server in levels.items():
        tether, floor = by_server["tether"], by_server["floor"]
        for (label, fmt), mine, theirs in zip(
            METRICS, figures(tether), figures(floor), strict=True
        ):
            rows.append(
                [str(clients), label, fmt.format(mine), fmt.format(theirs), _ratio(mine, theirs)]
            )
        rows.append(
            [str(clients), "requests measured", f"{tether.requests:,}", f"{floor.requests:,}", ""]
        )
        if tether.unsettled or floor.unsettled:
            counts = [f"{tether.unsettled:,}", f"{floor.unsettled:,}"]
            rows.append([str(clients), "of them not settled in the wait (202)", *counts, ""])
    print_table(
        f"HTTP: tether serve --demo beside the floor (FastAPI + uvicorn + one INSERT/COMMIT "
        f"at synchronous=FULL), {seconds:g} s per level, requests over {sessions} sessions",
        ["clients", "metric", "tether serve", "floor", "tether/floor"],
        rows,
    )

    goals: list[Goal] = []
    for clients, by_server in levels.items():
        tether, floor = by_server["tether"], by_server["floor"]
        cpu_t = tether.per_request(tether.server_cpu)
        cpu_f = floor.per_request(floor.server_cpu)
        ratio = cpu_t / cpu_f if cpu_f else float("inf")
        goals.append(
            Goal(
                f"server CPU per request ≤ {CPU_GOAL:g}x the floor's (N={clients})",
                f"{ratio:.2f}x ({cpu_t * 1000:.2f} vs {cpu_f * 1000:.2f} ms)" if cpu_f else "n/a",
                judged(ratio <= CPU_GOAL, judge and cpu_f > 0),
            )
        )
    goal = f"requests/s at N={RATE_GOAL_CLIENTS} ≥ {RATE_GOAL:g}x the floor's"
    top = levels.get(RATE_GOAL_CLIENTS)
    if top is not None and top["floor"].rate:
        ratio = top["tether"].rate / top["floor"].rate
        measured = f"{ratio:.2f}x ({top['tether'].rate:,.0f} vs {top['floor'].rate:,.0f}/s)"
        goals.append(Goal(goal, measured, judged(ratio >= RATE_GOAL, judge)))
    else:
        goals.append(Goal(goal, f"not run (no N={RATE_GOAL_CLIENTS})", None))
    print_goals(goals)


async def run(args: argparse.Namespace, servers: dict[str, Server]) -> dict[int, dict[str, Level]]:
    levels: dict[int, dict[str, Level]] = {}
    for clients in args.clients:
        levels[clients] = {}
        for key, server in servers.items():
            levels[clients][key] = await measure(
                server,
                clients,
                seconds=args.seconds,
                warmup=args.warmup,
                sessions=args.sessions,
            )
            level = levels[clients][key]
            print(
                f"{server.name}, {clients} clients: {level.rate:,.0f} requests/s, "
                f"{level.per_request(level.server_cpu) * 1000:.3f} ms server CPU a request",
                flush=True,
            )
    return levels


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per level")
    parser.add_argument("--warmup", type=float, default=2.0, help="not counted, per level")
    parser.add_argument("--sessions", type=int, default=512, help="instances per level")
    args = parser.parse_args()
    if min(args.clients) < 1 or args.sessions < max(args.clients):
        parser.error("--clients must be at least 1, and --sessions at least the most clients")
    # Stopped early (SIGTERM), still stop the servers: the finally below runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with scratch("tether-http-") as directory:
        servers: dict[str, Server] = {}
        try:
            servers["tether"] = start_tether(directory)
            servers["floor"] = start_floor(directory)
            for server in servers.values():
                server.ready()
            levels = asyncio.run(run(args, servers))
        finally:
            for server in servers.values():
                server.stop()
    report(levels, args.seconds, args.sessions, judge=args.seconds >= JUDGED_SECONDS)


if __name__ == "__main__":
    main()
