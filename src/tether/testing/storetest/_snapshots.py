"""Conformance cases for the ``snapshots`` capability (``SnapshotStore``): one opaque
snapshot per conversation, the journal's cache."""

from __future__ import annotations

import pytest

from tether.errors import ConversationNotFound
from tether.testing.storetest._base import T0, BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("SnapshotCases",)


@needs("snapshots")
class SnapshotCases(BaseConformance):
    """Keeping snapshots."""

    @case
    async def test_snapshot_keeps_the_latest(self, store: CompleteStore, fx: Fixtures) -> None:
        conversation = await fx.conversation()
        assert await store.get_snapshot(conversation) is None
        await store.put_snapshot(conversation, seq=1, body=b"one\x00")
        assert await store.get_snapshot(conversation) == (1, b"one\x00")
        await fx.fill(conversation, 4)
        await store.put_snapshot(conversation, seq=4, body=b"four")
        for stale in (4, 2):  # as far or behind: the one kept stays
            await store.put_snapshot(conversation, seq=stale, body=b"stale")
        assert await store.get_snapshot(conversation) == (4, b"four")
        assert await store.head(conversation) == 5  # the log is untouched

    @case
    async def test_snapshots_belong_to_one_conversation(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        parent, other = await fx.conversation(), await fx.conversation("other")
        await fx.fill(parent, 3)
        await store.put_snapshot(parent, seq=3, body=b"parent")
        assert await store.get_snapshot(other) is None
        assert await store.get_snapshot("conv-absent") is None
        with pytest.raises(ConversationNotFound):
            await store.put_snapshot("conv-absent", seq=1, body=b"x")

    @needs("forks")
    @case
    async def test_a_fork_keeps_a_snapshot_of_the_records_it_shares(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        parent = await fx.conversation()
        await fx.fill(parent, 4)
        await store.put_snapshot(parent, seq=3, body=b"first three")
        sharing = await store.fork(
            parent, at_seq=3, key=fx.key("at-3"), new_conversation_id="conv-at-3", created_at=T0
        )
        shorter = await store.fork(
            parent, at_seq=2, key=fx.key("at-2"), new_conversation_id="conv-at-2", created_at=T0
        )
        assert await store.get_snapshot(sharing.id) == (3, b"first three")
        assert await store.get_snapshot(shorter.id) is None  # it covers a record not shared
        await fx.fill(sharing.id, 3)
        await store.put_snapshot(sharing.id, seq=7, body=b"the child's own")
        assert await store.get_snapshot(parent) == (3, b"first three")
