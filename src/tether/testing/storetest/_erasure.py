"""Conformance cases for erasure, half of the ``retention`` capability
(``RetentionStore.erase_session``): a session removed for good, in one commit, with the
attachments only its log referenced."""

from __future__ import annotations

import dataclasses

import pytest

from tether.errors import AttachmentNotFound, ConversationNotFound, SubmissionNotFound
from tether.records import AttachmentRef, SteerReceived, format_time
from tether.store import ClaimSettlement
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs
from tether.testing.storetest._records import (
    append_all,
    draft_at,
    gate_request,
    nothing_of,
    open_conversation,
    say,
    saying,
)
from tether.testing.storetest._sessions import listed_ids

__all__ = ("ErasureCases",)


@needs("retention")
class ErasureCases(BaseConformance):
    """Erasing a session: what goes, what stays, what it counts."""

    @needs("gates", "sessions", "snapshots")
    @case
    async def test_erase_removes_a_session(self, store: CompleteStore, fx: Fixtures) -> None:
        """Its records, snapshot, gates, submissions and attempts; nothing of another."""
        first = await fx.claim(await fx.admit())
        cid = first.conversation_id
        await store.release(first.id, attempt_id=str(first.attempt_id))
        running = await fx.claim(first)
        second = await fx.admit(body="again")
        gate = draft_at(fx, 1, gate_request(cid, 2), execution_id="exe-1")
        await append_all(store, cid, gate, draft_at(fx, 2), fence=running.fence)
        await store.put_snapshot(cid, seq=3, body=b"snap")
        other = await fx.claim(await fx.admit("other"))
        ocid = other.conversation_id
        gate = draft_at(fx, 1, gate_request(ocid, 2), execution_id="exe-1")
        await append_all(store, ocid, gate, fence=other.fence)
        await store.put_snapshot(ocid, seq=2, body=b"other")
        kept_other = [await store.get_submission(other.id), await store.list_attempts(other.id)]
        assert len(await store.list_gates()) == 2
        conversation = await store.get_conversation(cid)

        erased = await store.erase_session(cid)
        assert (erased.conversation_id, erased.key) == (cid, fx.key())
        assert (erased.records, erased.submissions, erased.snapshot) == (3, 2, True)
        assert erased.attachments == ()
        await nothing_of(store, conversation)
        with pytest.raises(ConversationNotFound):
            await store.head(cid)
        assert await store.get_snapshot(cid) is None
        assert [gate.conversation_id for gate in await store.list_gates()] == [ocid]
        for submission in (running, second):
            with pytest.raises(SubmissionNotFound):
                await store.get_submission(submission.id)
            with pytest.raises(SubmissionNotFound):
                await store.list_attempts(submission.id)
        assert await store.list_submissions(conversation_id=cid) == []
        assert [s.id for s in await store.list_submissions()] == [other.id]
        assert [s.id for s in await store.list_runnable()] == []
        assert await store.list_expired_leases(fx.at(10_000)) == [kept_other[0]]
        # The other session is as it was.
        assert [await store.get_submission(other.id), await store.list_attempts(other.id)] == (
            kept_other
        )
        assert await store.verify(ocid) == 2
        assert await store.get_snapshot(ocid) == (2, b"other")
        assert await listed_ids(store) == [ocid]
        with pytest.raises(ConversationNotFound):
            await store.erase_session(cid)

    @case
    async def test_erase_counts_what_it_removed(self, store: CompleteStore, fx: Fixtures) -> None:
        cid = await open_conversation(store, "conv-1")
        await fx.fill(cid, 4)
        erased = await store.erase_session(cid)
        assert (erased.records, erased.submissions, erased.snapshot) == (5, 0, False)
        with pytest.raises(ConversationNotFound):
            await store.erase_session("conv-absent")

    @needs("sessions")
    @case
    async def test_an_erased_session_key_is_free_again(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """A new admission (even with the dispatch id of an erased one) starts afresh."""
        new = fx.new(dispatch_id="dispatch-1")
        old = (await store.admit(new)).submission
        await say(store, fx, old.conversation_id, 1)
        await store.erase_session(old.conversation_id)
        again = dataclasses.replace(new, id="sub-again", conversation_id="conv-again")
        admission = await store.admit(again)
        assert admission.created
        assert admission.submission.id == "sub-again"
        assert admission.submission.conversation_id == "conv-again"
        assert (await store.find_conversation(fx.key())).id == "conv-again"
        assert await store.head("conv-again") == 1
        assert await store.verify("conv-again") == 1
        assert await listed_ids(store) == ["conv-again"]
        # A conversation may take the erased one's id again, too.
        await store.erase_session("conv-again")
        await open_conversation(store, old.conversation_id, 3)
        [created] = await store.read(old.conversation_id)
        assert (created.seq, created.id, created.time) == (
            1,
            old.conversation_id,
            format_time(fx.at(3)),
        )
        assert await store.verify(old.conversation_id) == 1

    @needs("attachments", "forks")
    @case
    async def test_erase_removes_the_attachments_only_its_log_references(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """An attachment another conversation's records reference stays: a fork's copied
        records, or another log that was handed the same bytes."""
        a, b, c, d = [
            await store.put_attachment(f"bytes {name}".encode(), media_type="text/plain")
            for name in "abcd"
        ]
        absent = AttachmentRef(digest="sha256:" + "0" * 64, media_type="text/plain", size=1)
        one = await open_conversation(store, "conv-1", session="one")
        await append_all(store, one, draft_at(fx, 1, saying(a, b, a)))
        await append_all(
            store, one, draft_at(fx, 2, SteerReceived(body="see", mode="steer", attachments=(c,)))
        )
        await append_all(store, one, draft_at(fx, 3, saying(absent)))  # referenced, never stored
        fork = await store.fork(
            one, at_seq=2, key=fx.key("fork"), new_conversation_id="conv-fork", created_at=fx.at(4)
        )
        other = await fx.claim(await fx.admit("other"))
        await store.append_settled(
            other.conversation_id,
            [draft_at(fx, 5, saying(b))],
            expected_seq=1,
            fence=other.fence,
            settle=ClaimSettlement(other.id, str(other.attempt_id), {}, fx.at(5)),
        )

        assert (await store.erase_session(one)).attachments == (c.digest,)
        with pytest.raises(AttachmentNotFound):
            await store.get_attachment(c.digest)
        for kept in (a, b, d):
            assert (await store.get_attachment(kept.digest))[0] == kept
        assert (await store.erase_session(fork.id)).attachments == (a.digest,)
        with pytest.raises(AttachmentNotFound):
            await store.get_attachment(a.digest)
        assert (await store.erase_session(other.conversation_id)).attachments == (b.digest,)
        with pytest.raises(AttachmentNotFound):
            await store.get_attachment(b.digest)
        # One that no record references is not an erase's to remove.
        assert (await store.get_attachment(d.digest))[0] == d

    @needs("attachments")
    @case
    async def test_an_attachment_referenced_again_after_an_erase_is_kept(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        ref = await store.put_attachment(b"shared", media_type="text/plain")
        one = await open_conversation(store, "conv-1", session="one")
        two = await open_conversation(store, "conv-2", session="two")
        await say(store, fx, one, 1, ref)
        await say(store, fx, one, 2, ref)  # twice in one log
        await say(store, fx, two, 3, ref)
        assert (await store.erase_session(two)).attachments == ()
        assert (await store.get_attachment(ref.digest))[0] == ref
        assert (await store.erase_session(one)).attachments == (ref.digest,)
        with pytest.raises(AttachmentNotFound):
            await store.get_attachment(ref.digest)
        # Put again, and referenced by a new log: it belongs to that one now.
        assert await store.put_attachment(b"shared", media_type="text/plain") == ref
        three = await open_conversation(store, "conv-3", session="three")
        await say(store, fx, three, 4, ref)
        assert (await store.erase_session(three)).attachments == (ref.digest,)
