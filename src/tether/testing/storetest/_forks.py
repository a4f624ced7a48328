"""Conformance cases for the ``forks`` capability (``ForkStore.fork``): a new conversation
whose first records are another's, verbatim."""

from __future__ import annotations

import pytest

from tether.errors import ConversationNotFound, SeqOutOfRange, SessionExists
from tether.records import Actor, ConversationCreated
from tether.testing.storetest._base import T0, BaseConformance, CompleteStore, Fixtures, case, needs

__all__ = ("ForkCases",)


@needs("forks")
class ForkCases(BaseConformance):
    """Forking a log."""

    @case
    async def test_fork_shares_the_prefix_hashes(self, store: CompleteStore, fx: Fixtures) -> None:
        parent = await fx.conversation()
        await fx.fill(parent, 5)
        parent_records = await store.read(parent)
        child = await store.fork(
            parent, at_seq=4, key=fx.key("forked"), new_conversation_id="conv-child", created_at=T0
        )
        assert child.id == "conv-child" and child.key == fx.key("forked")
        assert child.parent is not None and (child.parent.conversation_id, child.parent.seq) == (
            parent,
            4,
        )
        child_records = await store.read(child.id)
        assert child_records[:4] == parent_records[:4]
        marker = child_records[4]
        assert marker.kind == "conversation_created" and marker.prev_hash == parent_records[3].hash
        assert marker.conversation_id == "conv-child" and marker.session == "forked"
        assert await store.verify(child.id) == 5
        assert (
            await store.get_conversation(child.id)
            == child
            == await store.find_conversation(fx.key("forked"))
        )
        await store.append(child.id, [fx.draft()], expected_seq=5, fence=0)
        assert await store.head(parent) == 6  # the parent is untouched

    @case
    async def test_fork_records_who_made_it(self, store: CompleteStore, fx: Fixtures) -> None:
        parent = await fx.conversation()
        await fx.fill(parent, 2)
        ann = Actor(subject="ann@acme", tenant="acme", display="Ann")
        signed = await store.fork(
            parent,
            at_seq=2,
            key=fx.key("signed"),
            new_conversation_id="conv-signed",
            created_at=T0,
            by=ann,
        )
        anonymous = await store.fork(
            parent, at_seq=2, key=fx.key("anon"), new_conversation_id="conv-anon", created_at=T0
        )
        [created] = (await store.read(signed.id))[2:]
        assert isinstance(created.payload, ConversationCreated)
        assert created.payload.by == ann and created.payload.parent == signed.parent
        assert await store.verify(signed.id) == 3
        [created] = (await store.read(anonymous.id))[2:]
        assert isinstance(created.payload, ConversationCreated) and created.payload.by is None
        assert b'"by"' not in created.canonical  # no one: the record is as it always was

    @case
    async def test_fork_rejects_bad_targets(self, store: CompleteStore, fx: Fixtures) -> None:
        parent = await fx.conversation()
        for seq in (0, 2, -1):
            with pytest.raises(SeqOutOfRange):
                await store.fork(
                    parent, at_seq=seq, key=fx.key("x"), new_conversation_id="conv-x", created_at=T0
                )
        with pytest.raises(SessionExists):
            await store.fork(
                parent, at_seq=1, key=fx.key(), new_conversation_id="conv-x", created_at=T0
            )
        with pytest.raises(ConversationNotFound):
            await store.get_conversation("conv-x")
