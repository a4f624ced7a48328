"""The crash half of the I/O-error loop (issue 46): a server SIGKILLed by a ``crash``
failpoint at a store call, or in the SQLite writer just before its COMMIT, then restarted:
every dispatch it acknowledged settles exactly once, the client's retry of the others is
admitted once, nothing is lost or written twice, and every log verifies.

CI kills it at a few chosen points; ``TETHER_SOAK=1`` at each of the first 40 store calls.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tether.engine import Runtime
from tether.store import SqliteStore, SubmissionStatus

from ..processes import kill, start
from .agents import echo_agent, loop_agent
from .conftest import FAST
from .failpoint_worker import WORK

pytestmark = pytest.mark.process

WORKER = Path(__file__).with_name("failpoint_worker.py")
ROOT = Path(__file__).resolve().parents[2]

POINTS = [
    "store.admit*=crash(nth(2))",  # the second dispatch (admitted and claimed), unacknowledged
    "store.append=crash(nth(2))",  # mid-run: the second execution's first records
    "store.append_settled=crash(once)",  # the first settlement's commit
    "sqlite.commit=crash(nth(6))",  # in the writer, after the batch, before its COMMIT
]
SOAK_POINTS = [
    pytest.param(f"store.*=crash(nth({n}))", marks=pytest.mark.slow) for n in range(1, 41)
]


@pytest.mark.parametrize("spec", [*POINTS, *SOAK_POINTS])
async def test_a_server_crashed_at_a_failpoint_recovers_on_restart(
    tmp_path: Path, spec: str
) -> None:
    url = f"sqlite:///{tmp_path}"
    acks = tmp_path / "acks"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TETHER_FAILPOINTS": spec}
    with (tmp_path / "worker.log").open("ab") as log:
        worker = start(
            [sys.executable, str(WORKER), url, str(acks)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    try:
        code = await asyncio.to_thread(worker.wait, 60)
    finally:
        kill(worker)
    log_text = (tmp_path / "worker.log").read_text()
    assert code in (-9, 0), log_text  # 0: it finished before the call the spec names
    if spec in POINTS:
        assert code == -9, log_text
    acknowledged = dict(
        line.split() for line in (acks.read_text() if acks.exists() else "").splitlines()
    )
    store = await SqliteStore.open(tmp_path)
    try:
        agents = {"loop": loop_agent(), "echo": echo_agent()}
        async with Runtime(agents, store, **FAST) as runtime:
            receipts = []
            for n, (agent, session, body) in enumerate(WORK):  # the client tries them again
                receipt = await runtime.dispatch(
                    agent, "acme", body, session=session, dispatch_id=f"d-{n}"
                )
                assert acknowledged.get(f"d-{n}", receipt.submission_id) == receipt.submission_id
                receipts.append(receipt)
            for receipt in receipts:
                async with asyncio.timeout(60):
                    outcome = await runtime.wait(receipt.submission_id)
                assert outcome["status"] == "succeeded", outcome
        submissions = await store.list_submissions()
        assert len(submissions) == len(WORK)
        assert all(s.status is SubmissionStatus.SETTLED for s in submissions)
        for conversation_id in {r.conversation_id for r in receipts}:
            records = await store.read(conversation_id)
            assert await store.verify(conversation_id) == len(records)
            mine = [r.submission_id for r in receipts if r.conversation_id == conversation_id]
            settled = [r.submission_id for r in records if r.kind == "submission_settled"]
            said = Counter(r.submission_id for r in records if r.kind == "user_message")
            assert settled == mine and said == Counter(mine), (settled, said)
    finally:
        await store.close()
