"""Soak: a real ``tether serve`` keeps its memory flat over many submissions.

    python benchmarks/soak.py [--submissions 20000] [--sessions 64] [--concurrency 8]

Starts ``tether serve --demo`` on a fresh SQLite store in a child process (the demo's echo
model answers at once, so the server's own overhead is what is measured), then drives
``--submissions`` chat turns over HTTP, each ``POST ...?wait=true`` on one of ``--sessions``
sessions (in turn), from ``--concurrency`` clients at a time, each followed by a
``GET /submissions/<unknown id>?wait=true``. Every ``--every`` submissions it samples
the server's resident set size from ``/proc/<pid>/status`` and, once done, prints a table
and whether the goal holds: RSS after all submissions within ``--tolerance`` (10 %) of RSS
after the first ``--baseline`` (2,000) submissions.

A submission of one session waits for the one before it; each client sends its next
submission only once the last has settled, so the store never holds a growing backlog and
what grows, if anything, is what the server keeps.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

import httpx

from benchmarks._measure import scratch
from benchmarks._table import Goal, judged, print_goals, print_table

MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """The resident set size of a process, from ``/proc`` (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(data: Path, log: Path, port: int) -> subprocess.Popen[bytes]:
    tether = Path(sys.executable).with_name("tether")
    command = [str(tether)] if tether.exists() else [sys.executable, "-m", "tether.cli"]
    return subprocess.Popen(
        [
            *command,
            "serve",
            "--demo",
            "--store",
            f"sqlite:///{data}",
            "--port",
            str(port),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "TETHER_DEMO_RESEARCH_SECONDS": "0"},
    )


def _ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server was not ready within 120 s: {log.read_text()[-2000:]}")


async def drive(
    url: str,
    pid: int,
    *,
    submissions: int,
    sessions: int,
    concurrency: int,
    every: int,
) -> list[tuple[int, float, int]]:
    """Send the submissions; samples of (submissions settled, seconds, RSS bytes)."""
    samples = [(0, 0.0, rss_bytes(pid))]
    started = time.perf_counter()
    sent = 0
    settled = 0
    failures: list[str] = []
    next_sample = every

    async def client_loop(client: httpx.AsyncClient) -> None:
        nonlocal sent, settled, next_sample
        while sent < submissions:
            n = sent
            sent += 1
            response = await client.post(
                "/agents/assistant/soak",
                params={"wait": "true", "timeout": 120},
                json={"body": f"hello {n}", "session": f"s{n % sessions}"},
            )
            if response.status_code != 200 or response.json().get("status") != "succeeded":
                failures.append(f"{response.status_code} {response.text[:200]}")
            # A wait on an id that does not exist (each used to leave a waiter behind).
            unknown = await client.get(f"/submissions/unknown-{n}", params={"wait": "true"})
            if unknown.status_code != 404:
                failures.append(f"unknown id: {unknown.status_code} {unknown.text[:200]}")
            settled += 1
            if settled >= next_sample:
                next_sample += every
                samples.append((settled, time.perf_counter() - started, rss_bytes(pid)))

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=180, limits=limits) as client:
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(client_loop(client))
    if samples[-1][0] != settled:
        samples.append((settled, time.perf_counter() - started, rss_bytes(pid)))
    if failures:
        raise RuntimeError(f"{len(failures)} submissions failed, e.g. {failures[0]}")
    return samples


JUDGED_BASELINE = 2_000  # a smaller baseline: the goal is not judged (a smoke run)


def report(samples: list[tuple[int, float, int]], baseline: int, tolerance: float) -> bool:
    """Print the table, the verdict and the goals table; true if the goal is met (or not
    judged: fewer submissions than the baseline)."""
    rows = []
    previous = (0, 0.0)
    for count, seconds, rss in samples:
        rate = (count - previous[0]) / (seconds - previous[1]) if seconds > previous[1] else 0.0
        rows.append([f"{count:,}", f"{seconds:.1f}", f"{rate:.0f}", f"{rss / MIB:.1f}"])
        previous = (count, seconds)
    print_table(
        "RSS of the tether serve process as submissions settle",
        ["submissions", "seconds", "submissions/s", "RSS MiB"],
        rows,
    )
    at_baseline = next((rss for count, _, rss in samples if count >= baseline), None)
    final_count, _, final = samples[-1]
    goal = f"soak: server RSS after all submissions within {tolerance:.0%} of RSS after the first"
    if at_baseline is None or final_count <= baseline:
        print(f"goal not judged: fewer than {baseline:,} submissions after the baseline")
        print_goals([Goal(f"{goal} {baseline:,}", "too few submissions", None)])
        return True
    change = (final - at_baseline) / at_baseline
    met = abs(change) <= tolerance
    print(
        f"RSS after {final_count:,} submissions: {final / MIB:.1f} MiB; after the first "
        f"{baseline:,}: {at_baseline / MIB:.1f} MiB; change {change:+.1%} "
        f"(goal: within {tolerance:.0%}): {'met' if met else 'NOT met'}"
    )
    print_goals(
        [
            Goal(
                f"{goal} {baseline:,}",
                f"{change:+.1%} ({final_count:,} submissions: {final / MIB:.1f} MiB, "
                f"{baseline:,}: {at_baseline / MIB:.1f} MiB)",
                judged(met, baseline >= JUDGED_BASELINE),
            )
        ]
    )
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=20_000)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--every", type=int, default=1_000, help="submissions between samples")
    parser.add_argument("--baseline", type=int, default=2_000, help="RSS compared against")
    parser.add_argument("--tolerance", type=float, default=0.10)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the goal is not met (off: it only says)"
    )
    args = parser.parse_args()
    # Stopped early (SIGTERM), still stop the server: the finally below runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with scratch("tether-soak-") as tmp:
        data, log = tmp / "data", tmp / "serve.log"
        port = _free_port()
        server = start_server(data, log, port)
        try:
            url = f"http://127.0.0.1:{port}"
            _ready(url, server, log)
            samples = asyncio.run(
                drive(
                    url,
                    server.pid,
                    submissions=args.submissions,
                    sessions=args.sessions,
                    concurrency=args.concurrency,
                    every=min(args.every, args.submissions),
                )
            )
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
    met = report(samples, args.baseline, args.tolerance)
    if args.check and not met:
        sys.exit(1)


if __name__ == "__main__":
    main()
