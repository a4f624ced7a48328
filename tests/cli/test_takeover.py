"""A restarted server takes a killed server's run over at once, not after its lease.

``kill -9`` a ``tether serve`` in the middle of the demo's slow research tool, with the
default 30 s lease, and start it again: the new server finds the dead worker's liveness lock
free (a file lock beside SQLite, an advisory lock on PostgreSQL) and resumes the run before
the dead claim's lease would have expired. What the test holds is the order of two moments
the store records (the new attempt's start and the old lease's end), not a wall-clock bound;
the delay between the new server answering ``/readyz`` and its attempt starting is measured
and printed.
"""

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from tether.store import open_store

from ..postgres import drop_schemas, fresh_schema, store_url
from ..processes import eventually, free_port, start, wait_ready
from .conftest import TETHER, cli_env

pytestmark = pytest.mark.process

AGENT = "/agents/assistant/me"


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> object:
    yield
    drop_schemas()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data'}"
    return store_url(fresh_schema())


async def _serve(url: str, log: Path, research_seconds: str) -> tuple[str, object, float]:
    """A ``tether serve --demo`` on ``url`` (default lease); its base URL, process, and the
    wall-clock time it first answered ``/readyz``."""
    port = free_port()
    with log.open("ab") as out:
        process = start(
            [*TETHER, "serve", "--demo", "--store", url, "--port", str(port)],
            stdout=out,
            stderr=out,
            env=cli_env(TETHER_DEMO_RESEARCH_SECONDS=research_seconds),
        )
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base) as client:
        await wait_ready(client, process, log)
    return base, process, time.time()


async def test_a_restart_takes_a_killed_run_over_before_its_lease_ends(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    first, first_process, _ = await _serve(url, log, research_seconds="60")
    try:
        async with httpx.AsyncClient(base_url=first, timeout=30) as client:
            accepted = (await client.post(AGENT, json={"body": "research tides"})).json()

        def tool_called() -> bool:
            records = httpx.get(f"{first}{AGENT}/records", timeout=30).json()["records"]
            return any(record["kind"] == "tool_called" for record in records)

        # The server is another process: polled, off the loop.
        await asyncio.to_thread(eventually, tool_called, log.read_text)
    finally:
        first_process.kill()  # type: ignore[attr-defined]  # SIGKILL: mid-tool
        first_process.wait(30)  # type: ignore[attr-defined]
    submission_id = accepted["submissionId"]
    store = await open_store(url)
    try:
        dead_claim = await store.get_submission(submission_id)
        assert dead_claim.status == "running" and dead_claim.lease_expires_at is not None

        second, second_process, ready_at = await _serve(url, log, research_seconds="0.2")
        async with httpx.AsyncClient(base_url=second, timeout=90) as client:
            settled = (
                await client.get(f"/submissions/{submission_id}", params={"wait": True})
            ).json()
        assert settled["status"] == "settled", settled
        assert "three findings about tides" in str(settled["settlement"]["result"])

        first_attempt, takeover = await store.list_attempts(submission_id)
        assert first_attempt.owner_id == dead_claim.owner_id != takeover.owner_id
        # Resumed while the dead claim's lease still ran: its worker was found dead.
        assert takeover.started_at < dead_claim.lease_expires_at
        assert f"worker {dead_claim.owner_id} died" in str(
            (await store.get_submission(submission_id)).last_error
        )
        delay = takeover.started_at.timestamp() - ready_at
        lease_left = (dead_claim.lease_expires_at - takeover.started_at).total_seconds()
        print(  # the measurement the test exists to show
            f"\n{url.partition(':')[0]}: attempt 2 started {delay:+.3f} s after the new server "
            f"was ready, {lease_left:.1f} s before the dead claim's lease would have ended "
            f"({datetime.now(UTC):%H:%M:%S})"
        )
        second_process.terminate()  # type: ignore[attr-defined]
        assert second_process.wait(30) == 0  # type: ignore[attr-defined]
    finally:
        await store.close()
    if url.startswith("sqlite"):  # an orderly shutdown leaves no lock file
        assert list((tmp_path / "data" / "tether.db-owners").iterdir()) == []
