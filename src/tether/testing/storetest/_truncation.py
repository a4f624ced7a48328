"""Conformance cases for retention's truncation of a log's head (``RetentionStore.truncate_log``).

A truncated log starts at its ``log_truncated`` record, which holds the seq and hashes of the
last record removed: everything after it reads, links, verifies, forks, exports and imports
as before, and nothing but the removed records (and a snapshot of them) goes.
"""

from __future__ import annotations

import pytest

from tether.errors import (
    AttachmentNotFound,
    ConversationNotFound,
    LogTampered,
    SeqOutOfRange,
    SeqTruncated,
)
from tether.messages import FilePart, Message
from tether.records import LogTruncated, Record, RecordDraft, UserMessage, format_time
from tether.store import MemoryStore
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs
from tether.testing.storetest._records import (
    append_all,
    draft_at,
    export_log,
    forge_record,
    gate_request,
    open_conversation,
    saying,
)
from tether.testing.storetest._sessions import matches_its_log

__all__ = ("TruncationCases",)


def _anchor(fx: Fixtures, records: list[Record], through: int, **changes: object) -> RecordDraft:
    """The anchor of a truncation through ``through``, as the engine would build it from
    ``records`` (the log from seq 1), carrying the last ``conversation_created`` it removes."""
    [replaced] = [record for record in records if record.seq == through]
    payload = LogTruncated(
        last_hash=replaced.hash,
        truncated_at=format_time(fx.at(100)),
        removed=through,
        path=[through],
        parents=[None],
        groups=[(through, 1)],
        messages=[Message.user(f"all of it up to {through}")],
        created=next(
            (r.to_wire() for r in reversed(records[:through]) if r.kind == "conversation_created"),
            None,
        ),
    )
    payload = payload.model_copy(update=changes)
    return RecordDraft(payload, id=fx.id("cut"), time=replaced.time)


async def _log_of(store: CompleteStore, fx: Fixtures, records: int = 6) -> tuple[str, list[Record]]:
    cid = await open_conversation(store, "conv-1")
    await append_all(store, cid, *(draft_at(fx, n) for n in range(1, records)))
    return cid, (await export_log(store, cid))[1]


@needs("retention")
class TruncationCases(BaseConformance):
    @needs("children", "sessions")
    @case
    async def test_truncation_puts_the_anchor_in_place_of_the_head(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """The anchor takes the removed record's seq and hashes; the rest reads, links and
        verifies unchanged; the head, last activity and key stay; the bytes are the log's."""
        cid, before = await _log_of(store, fx, 6)
        row = await matches_its_log(store, cid)
        truncated = await store.truncate_log(cid, _anchor(fx, before, 3))
        assert (truncated.conversation_id, truncated.removed, truncated.first_seq) == (cid, 3, 3)
        assert truncated.bytes_before == row.bytes
        _, after = await export_log(store, cid)
        anchor = after[0]
        assert [record.seq for record in after] == [3, 4, 5, 6]
        assert (anchor.kind, anchor.prev_hash, anchor.hash) == (
            LogTruncated.KIND,
            before[2].prev_hash,
            before[2].hash,
        )
        assert anchor.payload == _anchor(fx, before, 3).payload
        assert (anchor.conversation_id, anchor.session, anchor.time) == (
            cid,
            "default",
            before[2].time,
        )
        assert after[1:] == before[3:]
        assert await store.head(cid) == 6
        assert await store.verify(cid) == 6
        new = await matches_its_log(store, cid)
        assert (new.records, new.last_activity_at, new.key) == (6, row.last_activity_at, row.key)
        assert new.bytes == truncated.bytes_after
        # A read from before the anchor starts at it; one from it, after it.
        for after_seq in (0, 1, 2):
            assert (await store.read(cid, after_seq=after_seq, limit=2)) == after[:2]
        assert await store.read(cid, after_seq=3) == after[1:]
        # Appends chain on from the head as before.
        await append_all(store, cid, draft_at(fx, 7))
        assert await store.verify(cid) == 7

    @needs("children", "sessions")
    @case
    async def test_a_log_truncates_again_further_on(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid, before = await _log_of(store, fx, 8)
        await store.truncate_log(cid, _anchor(fx, before, 3))
        truncated = await store.truncate_log(cid, _anchor(fx, before, 6))
        assert (truncated.removed, truncated.first_seq) == (4, 6)  # the first anchor, 4 and 5
        _, after = await export_log(store, cid)
        assert [record.seq for record in after] == [6, 7, 8]
        assert after[0].payload == _anchor(fx, before, 6).payload
        assert await store.verify(cid) == 8
        await matches_its_log(store, cid)
        # Up to the whole log: the anchor is then the head record.
        await store.truncate_log(cid, _anchor(fx, before, 8))
        _, after = await export_log(store, cid)
        assert [(record.seq, record.kind) for record in after] == [(8, LogTruncated.KIND)]
        assert await store.verify(cid) == await store.head(cid) == 8
        await append_all(store, cid, draft_at(fx, 9))
        assert await store.verify(cid) == 9

    @case
    async def test_a_bad_truncation_changes_nothing(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid, before = await _log_of(store, fx, 6)
        await store.truncate_log(cid, _anchor(fx, before, 2))
        kept = await export_log(store, cid)
        with pytest.raises(SeqOutOfRange):
            await store.truncate_log(cid, _anchor(fx, before, 6, removed=7))
        for through in (1, 2):  # at or before the anchor kept
            with pytest.raises(SeqTruncated):
                await store.truncate_log(cid, _anchor(fx, before, through))
        with pytest.raises(ValueError):  # built from another record than the one at 4
            await store.truncate_log(cid, _anchor(fx, before, 4, last_hash=before[2].hash))
        with pytest.raises(ValueError):  # no anchor at all
            await store.truncate_log(cid, draft_at(fx, 9))
        with pytest.raises(ConversationNotFound):
            await store.truncate_log("conv-none", _anchor(fx, before, 4))
        with pytest.raises(ValueError):  # only a store writes an anchor
            await append_all(store, cid, _anchor(fx, before, 6))
        assert await export_log(store, cid) == kept
        assert await store.verify(cid) == 6

    @needs("snapshots")
    @case
    async def test_snapshots_of_the_removed_records_go(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid, before = await _log_of(store, fx, 6)
        await store.put_snapshot(cid, seq=3, body=b"up to 3")
        await store.truncate_log(cid, _anchor(fx, before, 3))
        assert await store.get_snapshot(cid) is None
        await store.put_snapshot(cid, seq=2, body=b"stale")  # of records removed: not kept
        await store.put_snapshot(cid, seq=3, body=b"stale")
        assert await store.get_snapshot(cid) is None
        await store.put_snapshot(cid, seq=5, body=b"up to 5")
        await store.truncate_log(cid, _anchor(fx, before, 4))
        assert await store.get_snapshot(cid) == (5, b"up to 5")

    @needs("children", "forks", "sessions")
    @case
    async def test_a_fork_of_a_truncated_log(self, store: CompleteStore, fx: Fixtures) -> None:
        """Before the anchor there is nothing to fork; from it on, the child's log starts
        with the parent's anchor and verifies."""
        cid, before = await _log_of(store, fx, 6)
        await store.truncate_log(cid, _anchor(fx, before, 3))
        with pytest.raises(SeqTruncated):
            await store.fork(
                cid,
                at_seq=2,
                key=fx.key("early"),
                new_conversation_id="conv-2",
                created_at=fx.at(9),
            )
        with pytest.raises(ConversationNotFound):
            await store.get_conversation("conv-2")
        fork = await store.fork(
            cid, at_seq=4, key=fx.key("late"), new_conversation_id="conv-3", created_at=fx.at(9)
        )
        _, parent = await export_log(store, cid)
        _, child = await export_log(store, fork.id)
        assert child[:2] == parent[:2]
        assert [record.seq for record in child] == [3, 4, 5]
        assert await store.verify(fork.id) == 5
        await matches_its_log(store, fork.id)

    @needs("attachments")
    @case
    async def test_truncation_keeps_the_attachments(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """The anchor's transcript may still show them; erasing the session removes them."""
        ref = await store.put_attachment(b"pic", media_type="image/png")
        cid = await open_conversation(store, "conv-1")
        await append_all(store, cid, draft_at(fx, 1, saying(ref)), draft_at(fx, 2), draft_at(fx, 3))
        _, records = await export_log(store, cid)
        await store.truncate_log(cid, _anchor(fx, records, 3))
        assert (await store.get_attachment(ref.digest))[1] == b"pic"
        assert (await store.erase_session(cid)).attachments == (ref.digest,)
        with pytest.raises(AttachmentNotFound):
            await store.get_attachment(ref.digest)

    @needs("import")
    @case
    async def test_a_truncated_log_exports_and_imports(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """Whole, from its anchor, in either direction; an anchor that does not hold its
        hash, or carries another conversation's creation, is refused with its seq."""
        cid, before = await _log_of(store, fx, 5)
        await store.truncate_log(cid, _anchor(fx, before, 3))
        conversation, records = await export_log(store, cid)
        async with MemoryStore() as target:
            assert await target.import_conversation(conversation, records) is True
            assert await export_log(target, cid) == (conversation, records)
            assert await target.verify(cid) == 5
            assert await target.import_conversation(conversation, records) is False
        await store.erase_session(cid)
        forged_hash = [forge_record(records[0], hash="ab" * 32), *records[1:]]
        other = records[0].payload.model_copy(
            update={"created": {**before[0].to_wire(), "id": "x"}}
        )
        assert isinstance(other, LogTruncated)
        forged_created = [
            forge_record(records[0], canonical=_recanonical(records[0], other)),
            *records[1:],
        ]
        for forged in (forged_hash, forged_created):
            with pytest.raises(LogTampered) as refused:
                await store.import_conversation(conversation, forged)
            assert refused.value.seq == 3
        with pytest.raises(ConversationNotFound):
            await store.get_conversation(cid)
        assert await store.import_conversation(conversation, records) is True
        assert await store.verify(cid) == 5
        await append_all(store, cid, RecordDraft(UserMessage(body="back"), id=fx.id("rec")))
        assert await store.verify(cid) == 6

    @case
    async def test_an_erase_of_a_truncated_log_counts_what_it_held(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid, before = await _log_of(store, fx, 6)
        await store.truncate_log(cid, _anchor(fx, before, 3))
        assert (await store.erase_session(cid)).records == 4  # the anchor and 4..6

    @needs("forks", "gates", "import")
    @case
    async def test_a_truncated_fork_imports_with_its_gates(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A fork made earlier than its parent's last record (its creation is sealed at that
        record's time), truncated past its own creation: it imports whole, its gates too."""
        cid = await open_conversation(store, "conv-1")
        await append_all(store, cid, draft_at(fx, 5), draft_at(fx, 6))
        fork = await store.fork(
            cid, at_seq=3, key=fx.key("fork"), new_conversation_id="conv-2", created_at=fx.at(1)
        )
        await append_all(store, fork.id, draft_at(fx, 7), draft_at(fx, 8, gate_request(fork.id, 6)))
        await append_all(store, fork.id, draft_at(fx, 9))
        conversation, records = await export_log(store, fork.id)
        await store.truncate_log(fork.id, _anchor(fx, records, 5))
        conversation, truncated = await export_log(store, fork.id)
        gates = await store.list_gates()
        await store.erase_session(fork.id)
        assert await store.list_gates() == []
        assert await store.import_conversation(conversation, truncated) is True
        assert await export_log(store, fork.id) == (conversation, truncated)
        assert await store.list_gates() == gates
        assert await store.verify(fork.id) == 7

    @needs("attachments", "import")
    @case
    async def test_attachments_an_anchor_shows_are_kept_for_it(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """An imported truncated log references the attachments its anchor's transcript
        shows: erasing the other session that shared one leaves it."""
        ref = await store.put_attachment(b"pic", media_type="image/png")
        cid, before = await _log_of(store, fx, 4)
        other = await open_conversation(store, "conv-9", session="other")
        await append_all(store, other, draft_at(fx, 1, saying(ref)))
        shown = Message(
            role="user", parts=(FilePart(digest=ref.digest, media_type=ref.media_type),)
        )
        await store.truncate_log(cid, _anchor(fx, before, 3, messages=[shown]))
        conversation, records = await export_log(store, cid)
        await store.erase_session(cid)
        assert await store.import_conversation(conversation, records) is True
        assert (await store.erase_session(other)).attachments == ()
        assert (await store.get_attachment(ref.digest))[1] == b"pic"
        assert (await store.erase_session(cid)).attachments == (ref.digest,)


def _recanonical(record: Record, payload: LogTruncated) -> bytes:
    """``record``'s canonical bytes with another payload (its hashes then no longer hold it)."""
    from tether._canonical import canonical_json

    return canonical_json({**record.fields, "payload": payload.to_json_object()})
