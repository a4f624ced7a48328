"""PostgreSQL specifics of child submissions: the wake of a parent under concurrency (two
last children settling at once, in two transactions on two connections, and a park racing
its last child), and the index behind every query of it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tether.records import RecordDraft, UserMessage
from tether.store import (
    WAIT_FOR_CHILDREN,
    ClaimSettlement,
    NewSubmission,
    SessionKey,
    Submission,
    SubmissionStatus,
    TaskParent,
)
from tether.store.postgres import PostgresStore
from tether.store.postgres._children import UNSETTLED_CHILDREN

from ..postgres import POSTGRES_URL, fresh_schema, store_url
from .test_query_plans import postgres_scans

pytestmark = pytest.mark.postgres

ROUNDS = 40
SETTLED = {"status": "succeeded", "result": "done"}
T0 = datetime(2026, 1, 1, tzinfo=UTC)
Settle = Callable[[PostgresStore, Submission], Awaitable[Any]]


@pytest.fixture
async def stores() -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores (two pools, so two connections) on one schema, as two workers have."""
    url = store_url(fresh_schema())
    first = await PostgresStore.open(url)
    second = await PostgresStore.open(url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


def _new(session: str, parent: Submission | None = None, call_id: str = "") -> NewSubmission:
    return NewSubmission(
        id=f"sub-{session}",
        key=SessionKey("agent", "i", session),
        conversation_id=f"conv-{session}",
        input={"kind": "message", "body": "hi"},
        created_at=T0,
        dispatch_id=None if parent is None else f"{parent.id}:{call_id}",
        parent=None
        if parent is None
        else TaskParent(parent.id, parent.conversation_id, 1, call_id, parent.depth + 1),
    )


async def _claim(store: PostgresStore, submission: Submission) -> Submission:
    return await store.claim(
        submission.id,
        attempt_id=f"att-{submission.id}-{submission.attempt_count + 1}",
        owner_id="worker",
        lease_expires_at=T0 + timedelta(hours=1),
        now=T0,
    )


async def _family(
    store: PostgresStore, name: str, children: int
) -> tuple[Submission, list[Submission]]:
    """A running root with ``children`` children, each claimed (running)."""
    root = await _claim(store, (await store.admit(_new(name))).submission)
    spawned = []
    for n in range(children):
        child = (await store.admit(_new(f"{name}-{n}", root, f"call-{n}"))).submission
        spawned.append(await _claim(store, child))
    return root, spawned


async def _park(store: PostgresStore, root: Submission) -> Submission:
    return await store.park(root.id, attempt_id=str(root.attempt_id), reason=WAIT_FOR_CHILDREN)


async def _append_settled(store: PostgresStore, child: Submission) -> None:
    cid = child.conversation_id
    await store.append_settled(
        cid,
        [RecordDraft(UserMessage(body="answer"))],
        expected_seq=await store.head(cid),
        fence=child.fence,
        settle=ClaimSettlement(child.id, str(child.attempt_id), SETTLED, T0),
    )


async def _absorbed(store: PostgresStore, child: Submission) -> None:
    await store.settle_absorbed(child.id, settlement=SETTLED, now=T0)


async def _reserved(store: PostgresStore, child: Submission) -> Submission:
    """Reserved, ready to finalize: the race is the finalize alone."""
    return await store.reserve_settlement(
        child.id, attempt_id=str(child.attempt_id), settlement=SETTLED
    )


async def _finalize(store: PostgresStore, child: Submission) -> None:
    await store.finalize_settlement(child.id, now=T0)


# Each pairing settles the last two children at once, by the operations named.
PAIRS: dict[str, tuple[Settle, Settle]] = {
    "finalize": (_finalize, _finalize),
    "append-settled": (_append_settled, _append_settled),
    "absorbed": (_absorbed, _absorbed),
    "mixed": (_finalize, _append_settled),
}


async def _ready(store: PostgresStore, child: Submission, how: Settle) -> Submission:
    """The child one statement from settled by ``how``."""
    if how is _finalize:
        return await _reserved(store, child)
    if how is _absorbed:  # a queued submission is the one absorbed: take the claim back
        return await store.release(child.id, attempt_id=str(child.attempt_id))
    if how is _append_settled:
        await store.read(child.conversation_id)  # its head known: the one-statement path
    return child


@pytest.mark.parametrize("pair", PAIRS)
async def test_two_last_children_settling_at_once_wake_their_parent(
    stores: tuple[PostgresStore, PostgresStore], pair: str
) -> None:
    """Under READ COMMITTED each settling transaction reads the other's child as unsettled
    unless the wake is serialized on the parent: then one of them must still wake it."""
    first, second = stores
    one, other = PAIRS[pair]
    for n in range(ROUNDS):
        root, (a, b) = await _family(first, f"{pair}-{n}", 2)
        assert (await _park(first, root)).status is SubmissionStatus.WAITING
        a, b = await _ready(first, a, one), await _ready(second, b, other)
        async with asyncio.timeout(30):
            await asyncio.gather(one(first, a), other(second, b))
        woken = await first.get_submission(root.id)
        assert woken.status is SubmissionStatus.QUEUED, f"round {n}: the parent was not woken"
        assert woken.attempt_count == 0


async def test_a_park_racing_its_last_child_never_waits_for_nothing(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Whichever commits first, the parent ends queued: parked first, the child's settlement
    wakes it; settled first, the park finds no unsettled child and requeues it."""
    first, second = stores
    for n in range(ROUNDS):
        root, (child,) = await _family(first, f"park-{n}", 1)
        child = await _reserved(second, child)
        async with asyncio.timeout(30):
            await asyncio.gather(_park(first, root), _finalize(second, child))
        assert (await first.get_submission(root.id)).status is SubmissionStatus.QUEUED, n


async def test_a_woken_parent_is_announced_as_work(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """The wake NOTIFYs work with the parent's id, as every requeue does: a worker of
    another process claims it without waiting for a poll."""
    store = stores[0]
    root, (child,) = await _family(store, "notified", 1)
    await _park(store, root)
    child = await _reserved(store, child)
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(f"{store.schema}.work")))
        await _finalize(store, child)
        async with asyncio.timeout(30):
            async for notice in conn.notifies():
                if notice.payload == root.id:
                    break
    assert (await store.get_submission(root.id)).status is SubmissionStatus.QUEUED


async def test_the_queries_of_children_are_served_by_an_index(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    store = stores[0]
    root, _ = await _family(store, "plans", 2)
    unsettled = UNSETTLED_CHILDREN.format(parent="%s")
    statements: list[tuple[Any, Any]] = [
        ("SELECT * FROM submissions WHERE parent_submission_id = %s ORDER BY position", (root.id,)),
        (
            "SELECT * FROM submissions WHERE status = 'waiting' AND wait_until <= %s "
            "ORDER BY position",
            (T0,),
        ),
        (  # the wake's check, as ``wake_parent`` runs it
            "UPDATE submissions SET status = 'queued' WHERE id = %s AND status = 'waiting' "
            f"AND wait_reason = 'children' AND NOT {unsettled}",
            (root.id, root.id),
        ),
        (  # the park's
            "UPDATE submissions SET status = CASE WHEN NOT "
            f"{UNSETTLED_CHILDREN.format(parent='submissions.id')} THEN 'queued' "
            "ELSE 'waiting' END WHERE id = %s",
            (root.id,),
        ),
    ]
    assert postgres_scans(POSTGRES_URL, store.schema, statements) == []
