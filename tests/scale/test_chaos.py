"""Chaos with real processes on one PostgreSQL schema: 3 workers, 1 API node, 100 submissions.

The scenario:

1. A fresh schema; 3 ``tether worker --lease 2`` processes and one ``tether serve
   --no-worker`` API node on it, all loading :mod:`tests.scale.chaos_app`, whose agent
   calls a slow model, then a slow durable step, then answers ``"echo: <body>"``. Every
   process audits its model calls, steps and refused writes into one JSON-lines file.
2. Through the API node, 100 submissions across 20 sessions (5 per session, each session's
   sent in order) are dispatched.
3. Mid-run, one worker is SIGKILLed while a model call of its own is in flight. Then another
   is SIGSTOPped while a model call of its own is in flight, at a moment chosen so the rest
   is deterministic: that call's lease was renewed less than 0.1 s ago, and none of the
   worker's database sessions is inside a transaction (``pg_stat_activity``, after 50 ms;
   otherwise it is SIGCONTed and another moment is sought: a worker frozen holding a row
   lock blocks the others' claims until it wakes, a separate problem). It stays stopped
   past its lease, until the survivor has claimed one of the calls it froze in (minting a
   higher fence) and is re-invoking that call's model with time to spare, so has appended
   nothing to that log since. Then it gets SIGCONT and wakes as a zombie with that call's
   completion still to journal (the app lets an in-flight effect finish even when the
   attempt is cancelled): at the same head, under the old fence, so it is refused as
   ``Fenced`` (or as a ``Conflict`` naming a later head, if the survivor's records of the
   re-run landed first on a loaded machine).
4. Every submission is awaited through the API node (``GET /submissions/{id}?wait=true``),
   then checked:

   - each settled exactly once: one ``submission_settled`` record per submission in its
     session's log, status ``settled``, result ``"echo: <its body>"``;
   - head-of-line order: a session's settlements follow admission order, and every record
     of a submission comes after the settlement of the one admitted before it;
   - the zombie's late writes were refused: a ``Fenced`` (or later-head ``Conflict``)
     rejection, audited by the stopped worker after it woke, of a call the survivor was
     re-running (so the test cannot pass
     vacuously); nobody else was ever refused; the killed call and the re-run ones show a
     second attempt;
   - no recorded model completion was requested again. Each model invocation is audited as
     ``(pid, t, inputHash)`` when it starts (``t`` is the wall clock, shared by all processes
     on this machine). Each ``assistant_message_completed`` record names its call by
     ``callId``; the ``model_called`` record with that ``callId`` gives the call's
     ``inputHash``, and the completion record's ``time`` is taken before its append commits.
     The rule: for every recorded completion of input ``h`` at time ``T``, no invocation of
     ``h`` starts after ``T``. A call whose completion was never recorded (the killed
     worker's, the zombie's) may be made again on recovery; a recorded one must be served
     from the log;
   - every log verifies (``GET /conversations/{id}/verify``) and its executions are well
     formed; no process logged an error (an attempt that crashed, a failed claim-loop pass,
     an asyncio task whose exception nobody retrieved), and the zombie is still alive.
5. Every process is killed (also on failure); the session's fixture drops the schema.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import pytest

from tether.journal import LogView
from tether.store.postgres import PostgresStore

from ..postgres import POSTGRES_URL, fresh_schema, store_url
from ..processes import free_port, kill, start, wait_ready
from .chaos_app import AGENT, LOG_ENV, answer, model_seconds

pytestmark = [pytest.mark.process, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
TETHER = [sys.executable, "-c", "from tether.cli import main; main()"]
APP = "tests.scale.chaos_app:agents"
LEASE = 2.0
SESSIONS = 20
PER_SESSION = 5
INSTANCE = "acme"
T = TypeVar("T")


@dataclass
class Cluster:
    """The child processes, their logs, and the audit file they share."""

    directory: Path
    url: str
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def audit_path(self) -> Path:
        return self.directory / "audit.jsonl"

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            LOG_ENV: str(self.audit_path),
            "PGAPPNAME": f"chaos-{name}",  # names its sessions in pg_stat_activity
        }
        with (self.directory / f"{name}.log").open("ab") as log:
            process = start(
                [*TETHER, *args, "--app", APP, "--store", self.url, "--lease", str(LEASE)],
                stdout=log,
                stderr=log,
                env=env,
                cwd=ROOT,
            )
        self.processes[name] = process
        return process

    def events(self) -> list[dict[str, Any]]:
        if not self.audit_path.exists():
            return []
        lines = self.audit_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def diagnostics(self) -> str:
        parts = []
        for name in self.processes:
            log = self.directory / f"{name}.log"
            text = log.read_text(errors="replace") if log.exists() else ""
            parts.append(f"--- {name} (pid {self.processes[name].pid}) ---\n{text[-3000:]}")
        audit = self.audit_path.read_text() if self.audit_path.exists() else ""
        parts.append("--- audit (tail) ---\n" + "\n".join(audit.splitlines()[-40:]))
        return "\n".join(parts)

    def kill_all(self) -> None:
        for process in self.processes.values():
            kill(process)  # SIGKILL also ends a stopped process


async def _until(what: str, predicate: Callable[[], T | None], seconds: float) -> T:
    """The first truthy value of ``predicate``, polled every 10 ms for up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def _open_calls(
    events: list[dict[str, Any]], pids: set[int], *, until: float
) -> list[tuple[int, dict[str, Any]]]:
    """The unfinished model calls of ``pids`` that will still be running at ``until``."""
    ended = {(e["pid"], e["hash"]) for e in events if e["event"] == "model_end"}
    return [
        (e["pid"], e)
        for e in events
        if e["event"] == "model_start"
        and e["pid"] in pids
        and (e["pid"], e["hash"]) not in ended
        and e["t"] + model_seconds(e["hash"]) > until
    ]


def _first(items: list[T]) -> T | None:
    return items[0] if items else None


async def _backend_states(application: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT coalesce(state, '') FROM pg_stat_activity WHERE application_name = %s",
            (application,),
        )
        return [row[0] for row in await cursor.fetchall()]


async def _dispatch(client: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    receipts = []
    for n in range(PER_SESSION):
        body = f"{session} message {n}"
        response = await client.post(
            f"/agents/{AGENT}/{INSTANCE}", json={"body": body, "session": session}
        )
        assert response.status_code == 202, response.text
        receipts.append({**response.json(), "body": body, "session": session})
    return receipts


async def _records(client: httpx.AsyncClient, session: str) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    while True:
        response = await client.get(
            f"/agents/{AGENT}/{INSTANCE}/records",
            params={"session": session, "after": records[-1]["seq"] if records else 0},
        )
        assert response.status_code == 200, response.text
        page = response.json()["records"]
        if not page:
            return records
        records += page


@pytest.mark.timeout(300)  # 17 s on an idle machine; its waits add up past 120 s on a loaded one
async def test_workers_killed_and_frozen_lose_nothing_repeat_nothing(tmp_path: Path) -> None:
    url = store_url(fresh_schema())
    store = await PostgresStore.open(url)  # migrated once, before the processes race to it
    cluster = Cluster(tmp_path, url)
    try:
        await _scenario(cluster, store)
    except BaseException:
        print(cluster.diagnostics())  # shown by pytest on failure
        print(f"records and submissions: {await _dump(store, tmp_path / 'store.jsonl')}")
        raise
    finally:
        cluster.kill_all()
        await store.close()


async def _scenario(cluster: Cluster, store: PostgresStore) -> None:
    port = free_port()
    api = cluster.start("api", "serve", "--no-worker", "--port", str(port))
    workers = {name: cluster.start(name, "worker") for name in ("w1", "w2", "w3")}
    by_pid = {process.pid: name for name, process in workers.items()}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        await wait_ready(client, api)
        await _until(
            "the workers to load the app",
            lambda: {e["pid"] for e in cluster.events() if e["event"] == "started"} >= set(by_pid),
            60,
        )
        sessions = [f"s{n:02d}" for n in range(SESSIONS)]
        batches = await asyncio.gather(*(_dispatch(client, s) for s in sessions))
        receipts = [receipt for batch in batches for receipt in batch]
        await _until(
            "progress", lambda: sum(e["event"] == "model_end" for e in cluster.events()) >= 15, 60
        )

        killed, killed_call = await _until(
            "a worker mid-call",
            lambda: _first(_open_calls(cluster.events(), set(by_pid), until=time.time() + 0.05)),
            60,
        )
        os.kill(killed, signal.SIGKILL)
        workers[by_pid[killed]].wait(10)

        alive = set(by_pid) - {killed}
        submission_of = {r["body"]: r["submissionId"] for r in receipts}
        zombie, stopped_at = await _freeze(cluster, store, alive, by_pid, submission_of)
        survivor = (alive - {zombie}).pop()
        frozen = {c["hash"] for _, c in _open_calls(cluster.events(), {zombie}, until=stopped_at)}

        def rerunning() -> list[str]:
            """The inputs of calls the zombie froze in that the survivor is re-invoking (with
            time to spare: a fifth of a second, room for the zombie to wake and write on a
            loaded machine, where 0.1 s was seen too short): it claimed their submissions,
            minting a higher fence, and has appended nothing to their logs since."""
            if time.time() <= stopped_at + LEASE:
                return []
            late = [e for e in cluster.events() if e["t"] > stopped_at]
            return [
                call["input"]
                for _, call in _open_calls(late, {survivor}, until=time.time() + 0.2)
                if call["hash"] in frozen
            ]

        rerun = await _until("the zombie's calls to be taken over", rerunning, 20 * LEASE)
        paused = time.time() - stopped_at
        os.kill(zombie, signal.SIGCONT)
        woke_at = time.time()

        deadline = time.monotonic() + 60
        for receipt in receipts:
            remaining = max(1.0, deadline - time.monotonic())
            response = await client.get(
                f"/submissions/{receipt['submissionId']}",
                params={"wait": True, "timeout": remaining},
                timeout=remaining + 10,
            )
            assert response.status_code == 200, response.text
            receipt["view"] = response.json()
        unsettled = [r for r in receipts if r["view"]["status"] != "settled"]
        assert not unsettled, f"{len(unsettled)} never settled, e.g. {unsettled[0]}"

        logs = {s: await _records(client, s) for s in sessions}
        for session, records in logs.items():
            conversation_id = records[0]["conversationId"]
            verified = await client.get(f"/conversations/{conversation_id}/verify")
            assert verified.status_code == 200, verified.text
            assert verified.json()["records"] == len(records), session
            LogView().extend(await store.read(conversation_id, limit=10_000))  # well formed

    events = cluster.events()
    _check_settled_once_in_order(receipts, logs)
    _check_no_completion_requested_again(logs, events)

    rejections = [e for e in events if e["event"] == "rejected"]
    # The append checks the head before the fence (seed §3): the zombie's write is Fenced
    # while the survivor has appended nothing since its claim, and a Conflict with a later
    # head once the survivor's own records of the re-run landed first (a loaded machine
    # can flush them before the zombie's write arrives). Either refuses it.
    refused = {
        e["input"]
        for e in rejections
        if e["pid"] == zombie
        and e["t"] > woke_at
        and (
            e["error"] == "Fenced"
            or (e["error"] == "Conflict" and e["actualSeq"] > e["expectedSeq"])
        )
    }
    assert refused & set(rerun), f"the zombie's late writes were not refused: {rejections}"
    assert {e["pid"] for e in rejections} == {zombie}, "a live worker was superseded"
    errors = [e for e in events if e["event"] == "log" and e["level"] in ("ERROR", "CRITICAL")]
    assert not errors, f"a process logged errors: {errors}"
    assert not [e for e in events if e["event"] == "effect_failed"]
    for name, process in workers.items():
        assert (process.poll() is None) == (name != by_pid[killed]), f"{name} exited"
    taken = [r for r in receipts if len(r["view"]["attempts"]) > 1]
    assert {r["body"] for r in taken} >= {killed_call["input"], *rerun}
    after_waking = sum(e["pid"] == zombie and e["t"] > woke_at for e in events)
    print(
        f"paused {paused:.2f} s; {len(taken)} submissions taken over; rejections "
        f"{dict(Counter((by_pid[e['pid']], e['error']) for e in rejections))}; "
        f"{sum(e['event'] == 'model_start' for e in events)} model invocations; "
        f"{after_waking} audit lines by the zombie after it woke"
    )


async def _dump(store: PostgresStore, path: Path) -> Path:
    """The evidence a failure leaves: every submission with its attempts, every record."""
    with path.open("w") as out:
        submissions = await store.list_submissions()
        for submission in submissions:
            attempts = [a.owner_id for a in await store.list_attempts(submission.id)]
            line: dict[str, Any] = {"submission": submission.id, "status": submission.status}
            line |= {"conversation": submission.conversation_id, "owners": attempts}
            out.write(json.dumps(line) + "\n")
        for conversation_id in sorted({s.conversation_id for s in submissions}):
            for record in await store.read(conversation_id, limit=10_000):
                out.write(json.dumps(record.to_wire()) + "\n")
    return path


async def _freeze(
    cluster: Cluster,
    store: PostgresStore,
    alive: set[int],
    by_pid: dict[int, str],
    submission_of: dict[str, str],
) -> tuple[int, float]:
    """SIGSTOP a worker mid-call, just after that call's lease was renewed, and outside any
    transaction; returns its pid and when it stopped."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # Renewed just now, a lease outlives LEASE - 0.1 s of the pause: the survivor can
        # re-run that call no sooner, so it is still re-running it when the pause ends.
        for candidate, call in _open_calls(cluster.events(), alive, until=time.time() + 0.1):
            lease = (await store.get_submission(submission_of[call["input"]])).lease_expires_at
            if lease is not None and lease.timestamp() - time.time() > LEASE - 0.1:
                pid = candidate
                break
        else:
            await asyncio.sleep(0.005)  # polled: the workers are other processes
            continue
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.time()
        await asyncio.sleep(0.05)  # statements already on the wire finish
        if all(state == "idle" for state in await _backend_states(f"chaos-{by_pid[pid]}")):
            return pid, stopped_at
        os.kill(pid, signal.SIGCONT)  # caught inside a transaction: try again
        await asyncio.sleep(0.1)  # the workers (other processes) move on to another moment
    raise AssertionError("never caught a worker mid-call, just renewed, outside a transaction")


def _check_settled_once_in_order(
    receipts: list[dict[str, Any]], logs: dict[str, list[dict[str, Any]]]
) -> None:
    for receipt in receipts:
        settlement = receipt["view"]["settlement"]
        assert settlement["status"] == "succeeded", receipt
        assert settlement["result"] == answer(receipt["body"]), receipt
    for session, records in logs.items():
        mine = [r["submissionId"] for r in receipts if r["session"] == session]
        settled = [r["submissionId"] for r in records if r["kind"] == "submission_settled"]
        assert settled == mine, f"{session}: settled out of order, twice, or not at all"
        settled_at = {
            r["submissionId"]: r["seq"] for r in records if r["kind"] == "submission_settled"
        }
        for earlier, later in itertools.pairwise(mine):
            early = [r["seq"] for r in records if r.get("submissionId") == later]
            assert min(early) > settled_at[earlier], (
                f"{session}: {later} ran before {earlier} settled"
            )


def _check_no_completion_requested_again(
    logs: dict[str, list[dict[str, Any]]], events: list[dict[str, Any]]
) -> None:
    invoked: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        if event["event"] == "model_start":
            invoked[event["hash"]].append(event)
    completions = 0
    for session, records in logs.items():
        called = {
            r["payload"]["callId"]: r["payload"]["inputHash"]
            for r in records
            if r["kind"] == "model_called"
        }
        for record in records:
            if record["kind"] != "assistant_message_completed":
                continue
            completions += 1
            input_hash = called[record["payload"]["callId"]]
            recorded_at = datetime.fromisoformat(record["time"]).timestamp()
            assert invoked[input_hash], f"{session}: a completion with no audited invocation"
            again = [e for e in invoked[input_hash] if e["t"] > recorded_at]
            assert not again, (
                f"{session}: completion seq {record['seq']} recorded at {record['time']} "
                f"was requested again: {again}"
            )
    assert completions == SESSIONS * PER_SESSION
