"""The stopwatch: many messages to many sessions of many tenants, all sent at once.

Usage (with ``.venv/bin/python -m examples.multitenant`` serving)::

    .venv/bin/python -m examples.multitenant.load --url http://127.0.0.1:8489
    #   --tenants acme globex initech, --sessions 3 (per tenant), --messages 3 (per session),
    #   --json (the measurements as JSON, for a program)

Each session's messages are admitted one after the other (so their order is defined), the
sessions all at once; then it waits for every answer and reads, from the server, when each
submission started running and when it settled. It prints a timeline, a row a session and a
column a tenth of a second, each digit the message running then::

    acme/user-1     11122223333
    globex/user-1   11122223333

Head-of-line order holds if, in every session, each message started only once the one
before it had settled, and its answer is to that message. Sessions ran in parallel if their
runs overlapped: many sessions finish in about the time of one.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import httpx

__all__ = ("Run", "in_order", "main", "measure", "most_at_once")


@dataclass(frozen=True)
class Run:
    """One message's run, its times in seconds since the first admission (server's clock)."""

    tenant: str
    session: str
    index: int
    submission_id: str
    started: float
    settled: float
    result: str


async def _send(client: httpx.AsyncClient, tenant: str, session: str, messages: int) -> list[str]:
    """Admit a session's messages in order (202 each, no waiting): their submission ids."""
    ids = []
    for index in range(1, messages + 1):
        body = {"body": f"message {index}", "session": session}
        accepted = await client.post(f"/agents/support/{tenant}", json=body)
        accepted.raise_for_status()
        ids.append(accepted.json()["submissionId"])
    return ids


async def _settled(client: httpx.AsyncClient, submission_id: str) -> dict[str, Any]:
    """The submission once it has settled (``?wait=true`` answers within its timeout)."""
    while True:
        view: dict[str, Any] = (
            await client.get(f"/submissions/{submission_id}", params={"wait": "true"})
        ).json()
        if view["status"] == "settled":
            return view


def _time(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


async def measure(url: str, tenants: list[str], sessions: int, messages: int) -> list[Run]:
    """Send, wait, and read back when each message ran."""
    keys = [(tenant, f"user-{n}") for tenant in tenants for n in range(1, sessions + 1)]
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        ids = await asyncio.gather(*(_send(client, t, s, messages) for t, s in keys))
        views = await asyncio.gather(*(_settled(client, i) for per in ids for i in per))
    origin = min(_time(view["createdAt"]) for view in views)
    numbered = [(key, index) for key in keys for index in range(1, messages + 1)]
    return [
        Run(
            tenant=tenant,
            session=session,
            index=index,
            submission_id=view["submissionId"],
            started=_time(view["attempts"][-1]["startedAt"]) - origin,
            settled=_time(view["settledAt"]) - origin,
            result=str(view["settlement"].get("result", view["settlement"].get("error"))),
        )
        for ((tenant, session), index), view in zip(numbered, views, strict=True)
    ]


def in_order(runs: list[Run]) -> bool:
    """In every session, each message started after the one before it settled, and each
    answer is to its own message."""
    by_session: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_session.setdefault((run.tenant, run.session), []).append(run)
    return all(
        all(later.started >= earlier.settled for earlier, later in itertools.pairwise(rows))
        and all(f"'message {run.index}'" in run.result for run in rows)
        for rows in by_session.values()
    )


def most_at_once(runs: list[Run]) -> int:
    """The most runs in flight at one moment (a sweep over their starts and ends)."""
    edges = sorted([(run.started, 1) for run in runs] + [(run.settled, -1) for run in runs])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def timeline(runs: list[Run], column: float = 0.1) -> list[str]:
    """A row per session: at each column, the digit of the message running then."""
    end = max(run.settled for run in runs)
    column = max(column, end / 100)  # at most 100 columns
    rows: dict[str, list[str]] = {}
    for run in runs:
        row = rows.setdefault(f"{run.tenant}/{run.session}", [" "] * (int(end / column) + 1))
        for slot in range(int(run.started / column), int(run.settled / column) + 1):
            row[slot] = str(run.index % 10)
    width = max(len(name) for name in rows)
    return [f"{name:<{width}}  {''.join(row).rstrip()}" for name, row in rows.items()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m examples.multitenant.load",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", default="http://127.0.0.1:8489")
    parser.add_argument("--tenants", nargs="+", default=["acme", "globex", "initech"])
    parser.add_argument("--sessions", type=int, default=3, help="per tenant (3)")
    parser.add_argument("--messages", type=int, default=3, help="per session (3)")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    args = parser.parse_args(argv)
    runs = asyncio.run(measure(args.url, args.tenants, args.sessions, args.messages))
    if args.json:
        print(json.dumps([asdict(run) for run in runs], indent=1))
        return
    for row in timeline(runs):
        print(row)
    call = min(run.settled - run.started for run in runs)
    total = max(run.settled for run in runs)
    print(
        f"{len(runs)} answers in {total:.1f} s (one call takes {call:.1f} s; one after "
        f"another they would take {call * len(runs):.1f} s)"
    )
    print(
        f"head-of-line order in every session: {'yes' if in_order(runs) else 'NO'}; "
        f"sessions running at once: up to {most_at_once(runs)}"
    )


if __name__ == "__main__":
    main()
