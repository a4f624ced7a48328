"""Conformance cases for child submissions: the parent link, listing children, the parent's
wait for them (woken in the commit that settles the last one), and waits past a deadline."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from tether.errors import ConversationNotFound, SubagentLimitReached
from tether.records import ConversationCreated
from tether.store import (
    WAIT_FOR_CHILDREN,
    ClaimSettlement,
    Submission,
    SubmissionStatus,
    TaskParent,
)
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("ChildCases",)

SETTLED = {"status": "succeeded", "result": "done"}


def _parent_of(
    parent: Submission,
    call_id: str = "call-1",
    *,
    seq: int = 1,
    max_total: int | None = None,
) -> TaskParent:
    return TaskParent(
        submission_id=parent.id,
        conversation_id=parent.conversation_id,
        seq=seq,
        call_id=call_id,
        depth=parent.depth + 1,
        max_total=max_total,
    )


async def _spawn(
    fx: Fixtures, parent: Submission, call_id: str, *, max_total: int | None = None
) -> Submission:
    """A child of ``parent`` in its own session, as a task call admits it."""
    return await fx.admit(
        f"task-{call_id}",
        dispatch_id=f"{parent.id}:{call_id}",
        parent=_parent_of(parent, call_id, max_total=max_total),
    )


async def _park(
    store: CompleteStore,
    running: Submission,
    *,
    expected_seq: int | None = None,
    wait_until: datetime | None = None,
) -> Submission:
    return await store.park(
        running.id,
        attempt_id=str(running.attempt_id),
        reason=WAIT_FOR_CHILDREN,
        expected_seq=expected_seq,
        wait_until=wait_until,
    )


async def _run_to_settled(store: CompleteStore, fx: Fixtures, child: Submission, how: str) -> None:
    """Settle ``child`` by one of the three operations that settle a submission."""
    if how == "absorbed":
        await store.settle_absorbed(child.id, settlement=SETTLED, now=fx.at(5))
        return
    claimed = await fx.claim(child)
    if how == "two-phase":
        await store.reserve_settlement(
            claimed.id, attempt_id=str(claimed.attempt_id), settlement=SETTLED
        )
        await store.finalize_settlement(claimed.id, now=fx.at(5))
        return
    cid = claimed.conversation_id
    await store.append_settled(
        cid,
        [fx.draft("answer")],
        expected_seq=await store.head(cid),
        fence=claimed.fence,
        settle=ClaimSettlement(claimed.id, str(claimed.attempt_id), SETTLED, fx.at(5)),
    )


@needs("children")
class ChildCases(BaseConformance):
    @case
    async def test_a_child_keeps_its_parent_and_depth(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        root = await fx.claim(await fx.admit())
        assert root.parent_submission_id is None and root.depth == 0
        new = fx.new("task-a", dispatch_id=f"{root.id}:a", parent=_parent_of(root, "a", seq=3))
        admission = await store.admit(new)
        child = admission.submission
        assert admission.created
        assert (child.parent_submission_id, child.parent_call_id, child.depth) == (root.id, "a", 1)
        assert await store.get_submission(child.id) == child
        conversation = await store.get_conversation(child.conversation_id)
        assert conversation.parent is not None
        assert (conversation.parent.conversation_id, conversation.parent.seq) == (
            root.conversation_id,
            3,
        )
        assert (conversation.parent.reason, conversation.parent.call_id) == ("task", "a")
        [created] = await store.read(child.conversation_id)
        assert isinstance(created.payload, ConversationCreated)
        assert created.payload.parent == conversation.parent
        assert await store.verify(child.conversation_id) == 1

    @case
    async def test_a_child_admission_is_idempotent(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A spawn re-driven after a crash admits the same child, never a second one."""
        root = await fx.claim(await fx.admit())
        first = await _spawn(fx, root, "a")
        again = await store.admit(
            fx.new("task-a", dispatch_id=f"{root.id}:a", parent=_parent_of(root, "a"))
        )
        assert not again.created and again.submission == first
        assert [c.id for c in await store.list_children(root.id)] == [first.id]

    @case
    async def test_a_tree_admits_at_most_its_total_below_the_root(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``max_total`` counts a tree's submissions at every depth; one past it is refused
        and leaves nothing, a re-admitted child is found whatever the count, and another
        tree has a total of its own."""
        root = await fx.claim(await fx.admit())
        a = await _spawn(fx, root, "a", max_total=3)
        await _spawn(fx, root, "b")  # unbounded, but counted by the bounded ones
        grandchild = await _spawn(fx, a, "a1", max_total=3)
        assert grandchild.depth == 2
        for parent, call_id in ((root, "c"), (a, "a2"), (grandchild, "a11")):
            with pytest.raises(SubagentLimitReached) as refused:
                await _spawn(fx, parent, call_id, max_total=3)
            assert (refused.value.root_submission_id, refused.value.limit) == (root.id, 3)
            with pytest.raises(ConversationNotFound):  # no conversation, no submission
                await store.find_conversation(fx.key(f"task-{call_id}"))
        assert len(await store.list_children(root.id)) == 2
        assert await store.list_children(grandchild.id) == []
        again = await store.admit(
            fx.new("task-a", dispatch_id=f"{root.id}:a", parent=_parent_of(root, "a", max_total=3))
        )
        assert not again.created and again.submission == a
        assert (await _spawn(fx, root, "d", max_total=4)).depth == 1  # a higher total admits
        other = await fx.claim(await fx.admit("other"))
        assert (await _spawn(fx, other, "x", max_total=1)).parent_submission_id == other.id
        absent = TaskParent("sub-absent", "conv-absent", seq=1, call_id="o", max_total=1)
        orphan = fx.new("task-o", parent=absent)
        assert (await store.admit(orphan)).created  # a parent not held bounds nothing

    @case
    async def test_concurrent_admissions_into_one_tree_keep_its_total(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Spawns racing from several parents of one tree (on a backend with concurrent
        writers, on several connections) admit exactly the total."""
        root = await fx.claim(await fx.admit())
        a = await _spawn(fx, root, "a", max_total=6)
        b = await _spawn(fx, root, "b", max_total=6)
        results = await asyncio.gather(
            *(
                _spawn(fx, parent, f"p{i}-{n}", max_total=6)
                for n in range(4)
                for i, parent in enumerate((root, a, b))
            ),
            return_exceptions=True,
        )
        admitted = [r for r in results if isinstance(r, Submission)]
        refused = [r for r in results if isinstance(r, SubagentLimitReached)]
        assert (len(admitted), len(refused)) == (4, 8)
        below = [*await store.list_children(root.id)]
        for child in list(below):
            below += await store.list_children(child.id)
        assert len(below) == 6

    @case
    async def test_list_children(self, store: CompleteStore, fx: Fixtures) -> None:
        root = await fx.claim(await fx.admit())
        other = await fx.claim(await fx.admit("other"))
        a = await _spawn(fx, root, "a")
        await _spawn(fx, other, "x")
        b = await _spawn(fx, root, "b")
        assert [c.id for c in await store.list_children(root.id)] == [a.id, b.id]
        assert await store.list_children(a.id) == []
        assert await store.list_children("sub-absent") == []
        await _run_to_settled(store, fx, a, "two-phase")
        children = await store.list_children(root.id)
        assert [c.status for c in children] == [SubmissionStatus.SETTLED, SubmissionStatus.QUEUED]

    @case
    async def test_a_parent_waits_while_a_child_is_unsettled(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        root = await fx.claim(await fx.admit())
        await _spawn(fx, root, "a")
        parked = await _park(store, root, expected_seq=await store.head(root.conversation_id))
        assert parked.status is SubmissionStatus.WAITING
        assert parked.wait_reason == WAIT_FOR_CHILDREN and parked.attempt_count == 0
        assert await store.list_runnable() != [] and parked.id not in {
            s.id for s in await store.list_runnable()
        }
        assert await store.list_expired_leases(fx.at(10_000)) == []

    @case
    async def test_a_park_for_settled_children_requeues(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """The children may all settle before the parent parks: then there is nothing to
        wait for, and the park requeues it (refunded) instead."""
        root = await fx.claim(await fx.admit())
        child = await _spawn(fx, root, "a")
        await _run_to_settled(store, fx, child, "two-phase")
        requeued = await _park(store, root)
        assert requeued.status is SubmissionStatus.QUEUED and requeued.attempt_count == 0
        lonely = await fx.claim(await fx.admit("lonely"))
        assert (await _park(store, lonely)).status is SubmissionStatus.QUEUED

    @case
    async def test_the_last_child_to_settle_wakes_the_parent(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """In the commit that settles it, by whichever operation settles it."""
        for how in ("two-phase", "append-settled", "absorbed"):
            root = await fx.claim(await fx.admit(f"root-{how}"))
            a, b = await _spawn(fx, root, f"{how}-a"), await _spawn(fx, root, f"{how}-b")
            await _park(store, root)
            await _run_to_settled(store, fx, a, how)
            assert (await store.get_submission(root.id)).status is SubmissionStatus.WAITING
            await _run_to_settled(store, fx, b, how)
            woken = await store.get_submission(root.id)
            assert woken.status is SubmissionStatus.QUEUED and woken.attempt_count == 0, how
            assert root.id in {s.id for s in await store.list_runnable()}

    @case
    async def test_only_a_wait_for_children_is_woken_by_them(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A parent waiting for an approval, or still running, is left as it is when its
        children settle; so is a settled one."""
        for_approval = await fx.claim(await fx.admit("approval"))
        running = await fx.claim(await fx.admit("running"))
        a, b = await _spawn(fx, for_approval, "a"), await _spawn(fx, running, "b")
        await store.park(
            for_approval.id, attempt_id=str(for_approval.attempt_id), reason="approval"
        )
        await _run_to_settled(store, fx, a, "two-phase")
        await _run_to_settled(store, fx, b, "append-settled")
        assert (await store.get_submission(for_approval.id)).status is SubmissionStatus.WAITING
        assert await store.get_submission(running.id) == running

    @case
    async def test_waits_past_their_deadline(self, store: CompleteStore, fx: Fixtures) -> None:
        root = await fx.claim(await fx.admit())
        other = await fx.claim(await fx.admit("other"))
        await _spawn(fx, root, "a")
        await _spawn(fx, other, "b")
        parked = await _park(store, root, wait_until=fx.at(60))
        await _park(store, other)
        assert parked.wait_until == fx.at(60)
        assert await store.list_expired_waits(fx.at(59)) == []
        assert [s.id for s in await store.list_expired_waits(fx.at(60))] == [root.id]
        assert [s.id for s in await store.list_expired_waits(fx.at(10_000))] == [root.id]
        await store.unpark(root.id)  # no longer waiting: no longer listed
        assert await store.list_expired_waits(fx.at(10_000)) == []
        again = await fx.claim(await store.get_submission(root.id))
        assert (await _park(store, again)).wait_until is None  # a park without one clears it
