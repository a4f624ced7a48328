"""Crash tests with real processes: SIGKILL a worker mid-turn, again and again, then recover."""

import asyncio
import itertools
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tether.engine import Receipt, Runtime
from tether.journal import LogView
from tether.store import SessionKey, SqliteStore, Store, SubmissionStatus, open_store

from ..postgres import fresh_schema, store_url
from ..processes import eventually_awaited, kill, start
from .agents import agent, echo_agent
from .conftest import FAST
from .test_approvals import gates_agent, pending_gate
from .test_inputs import AskOnce, pending_input
from .test_runtime import settle

pytestmark = pytest.mark.process

WORKER = Path(__file__).with_name("crash_worker.py")
APPROVER = Path(__file__).with_name("approve_worker.py")
SESSIONS = 10
PER_SESSION = 5
TEXTS = ("lookup the weather", "charge the card", "lookup and charge", "just chat", "charge twice")


def start_worker(directory: Path, effects: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with (directory / "worker.log").open("ab") as log:
        return start(
            [sys.executable, str(WORKER), str(directory), str(effects), *extra],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )


async def test_sigkill_at_random_points_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("TETHER_CRASH_SEED", "7")))
    kills = int(os.environ.get("TETHER_CRASH_KILLS", "6"))
    effects = tmp_path / "effects.log"
    store = await SqliteStore.open(tmp_path)
    receipts = []
    api = Runtime({"shop": echo_agent()}, store)  # admission only: no worker runs here
    await api.start(worker=False)
    for n in range(SESSIONS * PER_SESSION):
        text = f"{TEXTS[n % len(TEXTS)]} (order {n})"  # unique, so model inputs never coincide
        receipts.append(await api.dispatch("shop", "acme", text, session=f"s{n % SESSIONS}"))
    killed_mid_run = 0
    for _ in range(kills):
        if not [
            s for s in await store.list_submissions() if s.status is not SubmissionStatus.SETTLED
        ]:
            break  # everything is done: nothing left to kill mid-run
        worker = start_worker(tmp_path, effects)

        async def going(worker: subprocess.Popen[bytes] = worker) -> bool:
            running = await store.list_submissions(SubmissionStatus.RUNNING)
            return bool(running) or worker.poll() is not None

        # Let it get going (polled: its progress, through the store), then kill it at a
        # random moment: the randomness is the point.
        await eventually_awaited(going, "the worker never ran a submission")
        await asyncio.sleep(rng.uniform(0.0, 0.5))
        killed_mid_run += bool(await store.list_submissions(SubmissionStatus.RUNNING))
        kill(worker)
    final = start_worker(tmp_path, effects, "--settle-and-exit")
    try:
        await asyncio.wait_for(asyncio.to_thread(final.wait), 90)  # under the test's 120 s
    finally:
        kill(final)
    assert final.returncode == 0, (tmp_path / "worker.log").read_text()
    assert killed_mid_run > 0, "no kill landed while work was running"

    lines = effects.read_text().splitlines() if effects.exists() else []
    assert not [line for line in lines if line.startswith("VIOLATION")], (
        "a recorded completion was requested again"
    )
    charges = [line for line in lines if line.startswith("charge ")]
    assert len(charges) == len(set(charges)), "a non-idempotent tool key ran twice"

    for receipt in receipts:
        submission = await store.get_submission(receipt.submission_id)
        assert submission.status is SubmissionStatus.SETTLED, receipt
    for session in range(SESSIONS):
        mine = [r for r in receipts if r.session == f"s{session}"]
        records = await store.read(mine[0].conversation_id, limit=100_000)
        settled = [r.submission_id for r in records if r.kind == "submission_settled"]
        assert settled == [r.submission_id for r in mine], (
            "settled out of order, twice, or not at all"
        )
        for earlier, later in itertools.pairwise(mine):
            settled_at = next(
                r.seq
                for r in records
                if r.kind == "submission_settled" and r.submission_id == earlier.submission_id
            )
            assert all(
                r.seq > settled_at for r in records if r.submission_id == later.submission_id
            )
        LogView().extend(records)  # the executions are well formed
        assert await store.verify(mine[0].conversation_id) == len(records)
    await api.close()
    await store.close()


def start_approver(
    directory: Path, url: str, approval_id: str, when: str, how: str
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with (directory / "approver.log").open("ab") as log:
        command = [sys.executable, str(APPROVER), url, approval_id, when, how]
        return start(command, stderr=log, env=env)


async def pending_id(runtime: Runtime, store: Store, receipt: Receipt, gate: str) -> str:
    if gate == "approval":
        return await pending_gate(runtime, store, receipt)
    return await pending_input(runtime, receipt.submission_id)


@pytest.mark.parametrize("gate", ["approval", "input"])
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_an_approver_killed_at_its_decision_strands_nothing(
    tmp_path: Path, backend: str, when: str, gate: str
) -> None:
    """The cut "after the decision, before the requeue" (and the one just before it): the
    approver's process is SIGKILLed the moment its decision is durable, or just before it is
    written. The decision and the requeue are one commit: after it the parked run resumes at
    once; before it nothing was written and the gate is decided again. Either way the
    submission queued behind runs next. An answer to an input is cut the same ways."""
    url = f"sqlite:///{tmp_path}" if backend == "sqlite" else store_url(fresh_schema())
    store = await open_store(url)
    definition = gates_agent() if gate == "approval" else agent(AskOnce())
    runtime = Runtime({"mail": definition}, store, **FAST)
    how = "approve" if gate == "approval" else "answer"
    decided = "approval_decided" if gate == "approval" else "input_answered"
    try:
        await runtime.start()
        parked = await runtime.dispatch("mail", "acme", "send it")
        behind = await runtime.dispatch("mail", "acme", "then this")
        approval_id = await pending_id(runtime, store, parked, gate)
        approver = start_approver(tmp_path, url, approval_id, when, how)
        try:
            await asyncio.wait_for(asyncio.to_thread(approver.wait), 60)
        finally:
            kill(approver)
        assert approver.returncode == -9, (tmp_path / "approver.log").read_text()
        kinds = [r.kind for r in await store.read(parked.conversation_id)]
        assert kinds.count(decided) == (1 if when == "after" else 0)
        if when == "before":
            info = await runtime.submission(parked.submission_id)
            assert info.status is SubmissionStatus.WAITING
            if gate == "approval":
                await runtime.approve(approval_id, "approve", approver="ann")
            else:
                await runtime.answer(approval_id, "Ann", responder="ann")
        settled = await settle(runtime, parked.submission_id)
        assert settled["status"] == "succeeded"
        if gate == "input":
            assert settled["result"] == "Ann"
        # The next message parks on a gate of its own: the session is not stranded.
        await pending_id(runtime, store, behind, gate)
    finally:
        await runtime.close()
        await store.close()


ADMIT_WORKER = Path(__file__).with_name("admit_crash_worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("point", ["claimed", "invoked", "settled"])
@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_a_server_killed_at_each_boundary_of_a_claimed_admission_settles_once(
    tmp_path: Path, point: str, backend: str
) -> None:
    """The server that admits a message claims it in the same commit and runs it, its start
    held behind until the settlement: SIGKILLed right after the claim, after the model call
    (nothing of the run written) or after the settlement, a restart settles it exactly once,
    with one model call more at most."""
    url = f"sqlite:///{tmp_path}" if backend == "sqlite" else store_url(fresh_schema())
    calls = tmp_path / "model-calls.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (tmp_path / "worker.log").open("ab") as log:
        worker = start(
            [sys.executable, str(ADMIT_WORKER), url, point, str(calls)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    try:
        assert await asyncio.to_thread(worker.wait, 60) == -9, (tmp_path / "worker.log").read_text()
    finally:
        kill(worker)
    store = await open_store(url)
    try:
        conversation = await store.find_conversation(SessionKey("bot", "acme", "default"))
        [submission] = await store.list_submissions(conversation_id=conversation.id)
        before = await store.read(conversation.id)
        if point == "claimed":
            assert submission.status is SubmissionStatus.RUNNING and len(before) == 1
        if point == "invoked":
            assert len(before) == 1  # the model ran; nothing of the execution was written
        calls_before = calls.read_text().count("call") if calls.exists() else 0
        async with Runtime({"bot": echo_agent()}, store, **FAST) as runtime:
            settled = await settle(runtime, submission.id)
        assert settled == {"status": "succeeded", "result": "echo: hello"}
        records = await store.read(conversation.id)
        assert [r.kind for r in records].count("submission_settled") == 1
        assert [r.kind for r in records].count("execution_ended") == 1
        assert await store.verify(conversation.id) == len(records)
        assert calls_before == (1 if point == "invoked" else 0)  # it died in the one call
        if point == "settled":
            assert records == before  # already settled: the restart only reads
    finally:
        await store.close()
