"""Conformance cases for the ``import`` capability (``ImportStore.import_conversation``): an
exported log taken back in whole, checked as it streams, or not at all."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from tether.errors import ConversationNotFound, LogTampered, SessionExists
from tether.records import Actor, ConversationCreated, ConversationParent, Record, UserMessage
from tether.store import MemoryStore, TaskParent
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs
from tether.testing.storetest._records import (
    append_all,
    draft_at,
    export_log,
    forge_record,
    gate_request,
    nothing_of,
    open_conversation,
    say,
    saying,
)
from tether.testing.storetest._sessions import listed_ids, listed_row

__all__ = ("ImportCases",)


@needs("import")
class ImportCases(BaseConformance):
    """Importing an exported log."""

    @needs("attachments", "gates", "retention", "sessions")
    @case
    async def test_an_exported_log_imports_into_another_store(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A log read from one store (the reference here) comes back whole in another, and
        from the store under test into the reference: the same records, head and index
        rows; its gates are listed; it takes appends as any other."""
        async with MemoryStore() as source:
            ref = await source.put_attachment(b"pic", media_type="image/png")
            cid = await open_conversation(source, "conv-1", 1)
            await append_all(source, cid, draft_at(fx, 2, saying(ref)), draft_at(fx, 3))
            await append_all(
                source, cid, draft_at(fx, 4, gate_request(cid, 4), execution_id="exe-1")
            )
            conversation, records = await export_log(source, cid)
            assert await store.import_conversation(conversation, records) is True
            assert await export_log(store, cid) == (conversation, records)
            assert await store.find_conversation(conversation.key) == conversation
            assert await store.verify(cid) == await store.head(cid) == 4
            assert await store.list_sessions() == await source.list_sessions()
            assert await store.list_gates() == await source.list_gates()
            await store.put_attachment(b"pic", media_type="image/png")
            await append_all(store, cid, draft_at(fx, 5))
            assert await store.verify(cid) == 5
            assert (await store.erase_session(cid)).attachments == (ref.digest,)

        async with MemoryStore() as target:
            submission = await fx.claim(await fx.admit())
            drafts = (draft_at(fx, 1), draft_at(fx, 2))
            await append_all(store, submission.conversation_id, *drafts, fence=submission.fence)
            conversation, records = await export_log(store, submission.conversation_id)
            assert await target.import_conversation(conversation, records) is True
            assert await export_log(target, conversation.id) == (conversation, records)
            assert await target.list_sessions() == await store.list_sessions()

    @case
    async def test_an_identical_reimport_is_a_no_op(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid = await open_conversation(store, "conv-1")
        await fx.fill(cid, 3)
        conversation, records = await export_log(store, cid)
        assert await store.import_conversation(conversation, records) is False
        assert await store.import_conversation(conversation, records) is False
        assert await export_log(store, cid) == (conversation, records)

    @case
    async def test_a_shorter_or_longer_log_under_a_kept_id_is_refused(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid = await open_conversation(store, "conv-1")
        await fx.fill(cid, 3)
        conversation, records = await export_log(store, cid)
        with pytest.raises(SessionExists):
            await store.import_conversation(conversation, records[:2])
        async with MemoryStore() as source:
            await source.import_conversation(conversation, records)
            await fx.fill(cid, 1)  # the store's log moves on; the source's is behind it now
            with pytest.raises(SessionExists):
                await store.import_conversation(conversation, records)
            await say(source, fx, cid, 9)  # and a different record 5
            with pytest.raises(SessionExists):
                await store.import_conversation(*await export_log(source, cid))
        assert await store.verify(cid) == 5

    @needs("children", "gates", "sessions")
    @case
    async def test_a_tampered_log_is_refused_and_nothing_written(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        async with MemoryStore() as source:
            cid = await open_conversation(source, "conv-1", session="s")
            await append_all(
                source, cid, *(draft_at(fx, n, UserMessage(body="hello")) for n in range(4))
            )
            conversation, records = await export_log(source, cid)
        third, fourth = records[2], records[3]
        changed = forge_record(third, canonical=third.canonical.replace(b"hello", b"HELLO"))
        tampered = {
            3: [*records[:2], changed, *records[3:]],
            4: [*records[:3], forge_record(fourth, hash="0" * 64), *records[4:]],
            5: [*records[:4], forge_record(records[4], canonical=records[4].canonical + b" ")],
            2: [records[0], *records[2:]],  # a record missing
            1: records[1:],  # no conversation_created
        }
        for seq, forged in tampered.items():
            with pytest.raises(LogTampered) as raised:
                await store.import_conversation(conversation, forged)
            assert raised.value.seq == seq
            await nothing_of(store, conversation)
        with pytest.raises(LogTampered) as raised:
            await store.import_conversation(conversation, [])
        assert raised.value.seq == 1
        # The records chain, but they are another conversation's log.
        for other in (
            dataclasses.replace(conversation, key=fx.key("elsewhere")),
            dataclasses.replace(conversation, id="conv-2"),
            dataclasses.replace(conversation, created_at=fx.at(7)),
            dataclasses.replace(
                conversation, parent=ConversationParent(conversation_id="x", seq=1, reason="task")
            ),
        ):
            with pytest.raises(LogTampered):
                await store.import_conversation(other, records)
            await nothing_of(store, other)
        assert await store.list_sessions() == []
        assert await store.list_gates() == []
        assert await store.import_conversation(conversation, records) is True

    @needs("gates", "sessions")
    @case
    async def test_a_long_log_streams_in_and_a_late_failure_writes_nothing(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """``records`` may be a generator (a file read line by line): it is iterated once,
        and written in batches inside one transaction. A record that fails after several
        batches went in, or the generator's own error after the last record (a reader that
        finds the file's trailer disagrees), leaves nothing of the conversation."""
        async with MemoryStore() as source:
            cid = await open_conversation(source, "conv-1", session="long")
            body = "x" * 5_000  # batches close on their bytes, not only on their count
            for start in range(1, 1_100, 100):
                said = [UserMessage(body=f"{n} {body}") for n in range(100)]
                await append_all(
                    source, cid, *(draft_at(fx, start + n, p) for n, p in enumerate(said))
                )
            await append_all(
                source, cid, draft_at(fx, 1_200, gate_request(cid, 4), execution_id="exe-1")
            )
            conversation, records = await export_log(source, cid)
            expected_sessions = await source.list_sessions()
            expected_gates = await source.list_gates()
        assert len(records) == 1_102
        taken: list[int] = []

        def streamed(log: list[Record], *, then: Exception | None = None) -> Iterator[Record]:
            for record in log:
                taken.append(record.seq)
                yield record
            if then is not None:
                raise then

        late = forge_record(records[-2], canonical=records[-2].canonical.replace(b"x", b"y", 1))
        with pytest.raises(LogTampered) as raised:
            await store.import_conversation(conversation, streamed([*records[:-2], late]))
        assert raised.value.seq == len(records) - 1
        await nothing_of(store, conversation)
        with pytest.raises(ValueError, match="the trailer disagrees"):
            await store.import_conversation(
                conversation, streamed(records, then=ValueError("the trailer disagrees"))
            )
        await nothing_of(store, conversation)
        assert await store.list_sessions() == [] and await store.list_gates() == []

        taken.clear()
        assert await store.import_conversation(conversation, streamed(records)) is True
        assert taken == [record.seq for record in records]  # once, in order
        assert await export_log(store, cid) == (conversation, records)
        assert await store.verify(cid) == len(records)
        assert await store.list_sessions() == expected_sessions
        assert await store.list_gates() == expected_gates
        taken.clear()
        assert await store.import_conversation(conversation, streamed(records)) is False
        assert taken == [record.seq for record in records]

    @needs("sessions")
    @case
    async def test_an_import_of_a_taken_key_or_id_is_refused(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        async with MemoryStore() as source:
            await open_conversation(source, "conv-1", session="taken")
            await open_conversation(source, "conv-2", session="free")
            taken_key = await export_log(source, "conv-1")
            taken_id = await export_log(source, "conv-2")
        await open_conversation(store, "conv-other", session="taken")
        await open_conversation(store, "conv-2", session="elsewhere")
        for conversation, records in (taken_key, taken_id):
            with pytest.raises(SessionExists):
                await store.import_conversation(conversation, records)
        with pytest.raises(ConversationNotFound):
            await store.get_conversation("conv-1")
        with pytest.raises(ConversationNotFound):
            await store.find_conversation(fx.key("free"))
        assert await store.head("conv-2") == 1
        assert sorted(await listed_ids(store)) == ["conv-2", "conv-other"]

    @needs("forks")
    @case
    async def test_a_fork_imports_with_who_made_it(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A fork's ``conversation_created`` says who made it (``by``): the one thing in it
        not derived from the conversation, so it is checked as it says and kept."""
        async with MemoryStore() as source:
            cid = await open_conversation(source, "conv-1", 1)
            await append_all(source, cid, draft_at(fx, 2))
            ann = Actor(subject="ann@acme", tenant="acme", display="Ann")
            fork = await source.fork(
                cid,
                at_seq=2,
                key=fx.key("fork"),
                new_conversation_id="conv-f",
                created_at=fx.at(3),
                by=ann,
            )
            exported = [await export_log(source, one) for one in (cid, fork.id)]
        for conversation, records in exported:
            assert await store.import_conversation(conversation, records)
            assert await export_log(store, conversation.id) == (conversation, records)
            assert await store.verify(conversation.id) == len(records)
        created = (await store.read(fork.id))[-1].payload
        assert isinstance(created, ConversationCreated) and created.by == ann

    @needs("attachments", "children", "forks", "gates", "retention", "sessions")
    @case
    async def test_a_fork_and_a_child_import_with_their_parent_link(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A fork's log begins with its parent's records, verbatim: their gates stay the
        parent's, their attachments are the fork's too."""
        ref = await store.put_attachment(b"pic", media_type="image/png")
        async with MemoryStore() as source:
            sfx = Fixtures(source)
            root = await sfx.admit("root")
            cid = root.conversation_id
            await append_all(source, cid, draft_at(fx, 1, saying(ref)))
            await append_all(
                source, cid, draft_at(fx, 2, gate_request(cid, 3), execution_id="exe-1")
            )
            fork = await source.fork(
                cid, at_seq=3, key=fx.key("fork"), new_conversation_id="conv-f", created_at=fx.at(5)
            )
            await say(source, fx, fork.id, 6)
            task = TaskParent(root.id, cid, 2, "call-1")
            child = await sfx.admit("task", parent=task)
            exported = [
                await export_log(source, one) for one in (cid, fork.id, child.conversation_id)
            ]
            forked, copied = exported[1]
            # Named at another seq, the fork's log is not this one.
            elsewhere = dataclasses.replace(
                forked, parent=ConversationParent(conversation_id=cid, seq=2, reason="fork")
            )
            with pytest.raises(LogTampered):
                await store.import_conversation(elsewhere, copied)
            for conversation, records in exported[1:]:  # the children first, without the root
                assert await store.import_conversation(conversation, records)
            assert await store.list_gates() == []  # the fork's copied request is the root's
            assert await store.import_conversation(*exported[0])
            assert await store.list_gates() == await source.list_gates()
            for conversation, records in exported:
                assert await export_log(store, conversation.id) == (conversation, records)
                assert await store.verify(conversation.id) == len(records)
            assert await store.list_sessions() == await source.list_sessions()
        row = await listed_row(store, fork.id)
        assert row.parent == fork.parent and row.records == 5
        assert (await listed_row(store, child.conversation_id)).parent == task.conversation_parent()
        assert (await store.erase_session(cid)).attachments == ()  # the fork's copy keeps it
        assert (await store.erase_session(fork.id)).attachments == (ref.digest,)
