"""What a PostgreSQL settlement wakes: the claim loops only when its session may have a next
head, in this process and in others, and a parent it woke wherever it is."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tether.records import RecordDraft, UserMessage
from tether.store import (
    WAIT_FOR_CHILDREN,
    ClaimSettlement,
    NewSubmission,
    SessionKey,
    Submission,
    TaskParent,
)
from tether.store.postgres import PostgresStore, _log

from ..postgres import fresh_schema, store_url

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def stores() -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """A worker's store and another process's, on one schema; polls an hour apart, so only
    a notice can wake a wait in time."""
    url = store_url(fresh_schema())
    worker = await PostgresStore.open(url, poll_interval=3600)
    other = await PostgresStore.open(url, poll_interval=3600)
    try:
        yield worker, other
    finally:
        await worker.close()
        await other.close()


def _new(session: str, n: int = 1, parent: Submission | None = None) -> NewSubmission:
    return NewSubmission(
        id=f"sub-{session}-{n}",
        key=SessionKey("agent", "i", session),
        conversation_id=f"conv-{session}",
        input={"kind": "message", "body": "hi"},
        created_at=T0,
        parent=None
        if parent is None
        else TaskParent(parent.id, parent.conversation_id, 1, "call", parent.depth + 1),
    )


async def _claimed(store: PostgresStore, new: NewSubmission) -> Submission:
    submission = (await store.admit(new)).submission
    return await store.claim(
        submission.id,
        attempt_id=f"att-{submission.id}",
        owner_id="worker",
        lease_expires_at=T0 + timedelta(hours=1),
        now=T0,
    )


async def _settle(store: PostgresStore, running: Submission) -> None:
    """Settle as a run does: after reading the log, so in the one-statement append."""
    cid = running.conversation_id
    head = (await store.read(cid))[-1].seq
    await store.append_settled(
        cid,
        [RecordDraft(UserMessage(body="answer"))],
        expected_seq=head,
        fence=running.fence,
        settle=ClaimSettlement(running.id, str(running.attempt_id), {"output": "ok"}, T0),
    )


@contextlib.asynccontextmanager
async def _listening(store: PostgresStore, topic: str) -> AsyncIterator[asyncio.Event]:
    with store.listen(topic) as woken:
        async with asyncio.timeout(60):
            await woken.wait()  # the LISTEN is in place: every waiter is told to look again
        woken.clear()
        yield woken


async def test_the_last_submission_of_a_session_settles_without_waking_a_claim_loop(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    worker, other = stores
    running = await _claimed(worker, _new("alone"))
    async with _listening(worker, "work") as local_work, _listening(other, "work") as remote_work:
        with other.listen(f"settled:{running.id}") as settled:
            await _settle(worker, running)
            async with asyncio.timeout(60):
                await settled.wait()  # every notice of its transaction has arrived by now
    assert not local_work.is_set()  # nothing of its session is left to claim
    assert not remote_work.is_set()


async def test_a_settlement_with_a_next_submission_queued_wakes_every_claim_loop(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    worker, other = stores
    running = await _claimed(worker, _new("busy"))
    await worker.admit(_new("busy", 2))
    async with _listening(worker, "work") as local_work, _listening(other, "work") as remote_work:
        await _settle(worker, running)
        async with asyncio.timeout(60):
            await local_work.wait()
            await remote_work.wait()


async def test_a_work_notice_heard_while_the_settlement_ran_wakes_the_loop_after_it(
    stores: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admission into the session that commits while the settlement's statement runs is
    not seen by it, and a claim its notice starts may run before the settlement commits:
    the worker that settles looks again once it has."""
    worker, _ = stores
    running = await _claimed(worker, _new("raced"))
    real = _log.append_if_head
    async with _listening(worker, "work") as local_work:

        async def raced(*args: Any, **kwargs: Any) -> Any:
            worker._wake.work()  # the admission's notice, heard mid-statement
            await local_work.wait()
            local_work.clear()  # and the claim it started found nothing yet
            return await real(*args, **kwargs)

        monkeypatch.setattr(_log, "append_if_head", raced)
        await _settle(worker, running)
        async with asyncio.timeout(60):
            await local_work.wait()


async def test_a_child_that_wakes_its_parent_wakes_its_own_process_claim_loop(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Its own NOTIFY's echo is skipped, so the settlement itself says there is work."""
    worker, _ = stores
    parent = await _claimed(worker, _new("parent"))
    child = await _claimed(worker, _new("child", parent=parent))
    await worker.park(parent.id, attempt_id=str(parent.attempt_id), reason=WAIT_FOR_CHILDREN)
    async with _listening(worker, "work") as local_work:
        await _settle(worker, child)
        async with asyncio.timeout(60):
            await local_work.wait()
