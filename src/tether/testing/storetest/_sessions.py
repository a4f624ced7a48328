"""Conformance cases for the sessions index (``Store.list_sessions``), erasure
(``erase_session``), the import of an exported log (``import_conversation``) and durable
schedules (``put_schedule``, ``list_schedules``, ``delete_schedule``).

What paging promises: pages read one after another, with nothing written in between, list
every conversation exactly once, in order. A cursor names a place in the order, not a row,
and an append only ever moves a conversation to the front (a log's times never go back), so
across appends between pages no conversation is listed twice, and every one not appended to
meanwhile is still listed exactly once; one appended to meanwhile may be missed (it moved in
front of the cursor: start again from the first page for the newest view), and one created
meanwhile may or may not be.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from pydantic import JsonValue

from tether.errors import (
    AttachmentNotFound,
    ConversationNotFound,
    DispatchConflict,
    InvalidCursor,
    LogTampered,
    SessionExists,
    SubmissionNotFound,
)
from tether.messages import args_digest
from tether.records import (
    ApprovalRequested,
    AttachmentRef,
    ConversationParent,
    Payload,
    Record,
    RecordDraft,
    SteerReceived,
    UserMessage,
    format_time,
)
from tether.store import (
    ClaimSettlement,
    Conversation,
    MemoryStore,
    ScheduleRow,
    SessionKey,
    SessionRow,
    Store,
    TaskParent,
)
from tether.testing.storetest._base import AGENT, INSTANCE, BaseConformance, Fixtures, case

__all__ = ("SessionCases",)


def _draft(fx: Fixtures, at: float, payload: Payload | None = None, **kwargs: Any) -> RecordDraft:
    return RecordDraft(
        payload if payload is not None else UserMessage(body="hello"),
        id=fx.id("rec"),
        time=format_time(fx.at(at)),
        **kwargs,
    )


def _said(*refs: AttachmentRef, body: str = "look") -> UserMessage:
    return UserMessage(body=body, attachments=refs)


async def _open(
    store: Store,
    cid: str,
    at: float = 0,
    *,
    session: str = "default",
    agent: str = AGENT,
    instance: str = INSTANCE,
) -> str:
    conversation, created = await store.ensure_conversation(
        SessionKey(agent, instance, session), conversation_id=cid, created_at=Fixtures.at(at)
    )
    assert created
    return conversation.id


async def _append(store: Store, cid: str, *drafts: RecordDraft, fence: int = 0) -> list[Record]:
    return await store.append(cid, list(drafts), expected_seq=await store.head(cid), fence=fence)


async def _say(store: Store, fx: Fixtures, cid: str, at: float, *refs: AttachmentRef) -> None:
    await _append(store, cid, _draft(fx, at, _said(*refs) if refs else None))


async def _export(store: Store, cid: str) -> tuple[Conversation, list[Record]]:
    """A conversation and its whole log, as an export reads them."""
    records: list[Record] = []
    while batch := await store.read(cid, after_seq=records[-1].seq if records else 0, limit=3):
        records += batch
    return await store.get_conversation(cid), records


async def _ids(store: Store, **filters: Any) -> list[str]:
    return [row.conversation_id for row in await store.list_sessions(limit=10_000, **filters)]


async def _row(store: Store, cid: str) -> SessionRow:
    [row] = [row for row in await store.list_sessions(limit=10_000) if row.conversation_id == cid]
    return row


async def _expected_row(store: Store, cid: str) -> SessionRow:
    """The row of ``cid`` as its log says it must be (but for the cursor)."""
    conversation, records = await _export(store, cid)
    return SessionRow(
        conversation_id=cid,
        key=conversation.key,
        created_at=conversation.created_at,
        last_activity_at=datetime.fromisoformat(records[-1].time),
        records=records[-1].seq,
        bytes=sum(len(record.canonical) for record in records),
        parent=conversation.parent,
    )


async def _matches_its_log(store: Store, cid: str) -> SessionRow:
    row = await _row(store, cid)
    assert row.cursor
    assert dataclasses.replace(row, cursor="") == await _expected_row(store, cid)
    return row


def _gate(cid: str, seq: int, call: str = "call-1") -> ApprovalRequested:
    args: dict[str, JsonValue] = {"to": "bob@example.com"}
    return ApprovalRequested(
        approval_id=f"{cid}.{seq}",
        call_id=call,
        tool="mail",
        args=args,
        args_digest=args_digest(args),
    )


def _forged(record: Record, *, canonical: bytes | None = None, hash: str | None = None) -> Record:
    return Record(
        record.seq,
        record.kind,
        record.canonical if canonical is None else canonical,
        record.prev_hash,
        record.hash if hash is None else hash,
    )


async def _nothing_of(store: Store, conversation: Conversation) -> None:
    """Nothing of ``conversation`` is stored."""
    with pytest.raises(ConversationNotFound):
        await store.get_conversation(conversation.id)
    with pytest.raises(ConversationNotFound):
        await store.find_conversation(conversation.key)
    with pytest.raises(ConversationNotFound):
        await store.read(conversation.id)
    assert conversation.id not in await _ids(store)


class SessionCases(BaseConformance):
    # --- the sessions index ---------------------------------------------------------

    @case
    async def test_sessions_are_listed_newest_activity_first(
        self, store: Store, fx: Fixtures
    ) -> None:
        """By the time of each log's last record, then by conversation id (ties)."""
        assert await store.list_sessions() == []
        await _open(store, "conv-z", 2, session="z")
        await _open(store, "conv-m", 2, session="m")
        await _open(store, "conv-a", 1, session="a")
        await _open(store, "conv-q", 3, session="q")
        assert await _ids(store) == ["conv-q", "conv-m", "conv-z", "conv-a"]
        await _say(store, fx, "conv-a", 5)
        assert await _ids(store) == ["conv-a", "conv-q", "conv-m", "conv-z"]
        await _say(store, fx, "conv-z", 3)  # as late as conv-q's last: by id, then
        assert await _ids(store) == ["conv-a", "conv-q", "conv-z", "conv-m"]
        # A record drafted before its predecessor takes its time: the activity never goes back.
        await _say(store, fx, "conv-a", 0)
        assert (await _row(store, "conv-a")).last_activity_at == fx.at(5)
        assert await _ids(store) == ["conv-a", "conv-q", "conv-z", "conv-m"]
        assert [row.conversation_id for row in await store.list_sessions(limit=2)] == [
            "conv-a",
            "conv-q",
        ]
        with pytest.raises(ValueError):
            await store.list_sessions(limit=0)

    @case
    async def test_a_session_row_tracks_its_log(self, store: Store, fx: Fixtures) -> None:
        """Its records, bytes and last activity are those of its log after every kind of
        append: a plain one, one that settles a claim, a decision."""
        submission = await fx.claim(await fx.admit())
        cid = submission.conversation_id
        row = await _matches_its_log(store, cid)
        assert (row.records, row.key, row.created_at, row.parent) == (1, fx.key(), fx.at(0), None)
        assert row.last_activity_at == fx.at(0)
        await _append(
            store,
            cid,
            _draft(fx, 4),
            _draft(fx, 5, UserMessage(body="x" * 500)),
            fence=submission.fence,
        )
        row = await _matches_its_log(store, cid)
        assert (row.records, row.last_activity_at) == (3, fx.at(5))
        await store.append_decision(
            cid, [_draft(fx, 6)], expected_seq=await store.head(cid), wake=None
        )
        assert (await _matches_its_log(store, cid)).records == 4
        settle = ClaimSettlement(submission.id, str(submission.attempt_id), {"ok": True}, fx.at(9))
        await store.append_settled(
            cid,
            [_draft(fx, 7)],
            expected_seq=await store.head(cid),
            fence=submission.fence,
            settle=settle,
        )
        row = await _matches_its_log(store, cid)
        assert (row.records, row.last_activity_at) == (5, fx.at(7))
        assert row.bytes > 500

    @case
    async def test_forks_and_task_children_are_listed_with_their_parent(
        self, store: Store, fx: Fixtures
    ) -> None:
        root = await fx.claim(await fx.admit("root"))
        cid = root.conversation_id
        await _append(store, cid, _draft(fx, 1), _draft(fx, 2), _draft(fx, 3), fence=root.fence)
        fork = await store.fork(
            cid, at_seq=3, key=fx.key("fork"), new_conversation_id="conv-fork", created_at=fx.at(8)
        )
        task = TaskParent(root.id, cid, 4, "call-1")
        child = await fx.admit("task", parent=task)
        forked = await _matches_its_log(store, fork.id)
        assert forked.parent == ConversationParent(conversation_id=cid, seq=3, reason="fork")
        assert forked.records == 4 and forked.last_activity_at == fx.at(8)
        spawned = await _matches_its_log(store, child.conversation_id)
        assert spawned.parent == task.conversation_parent() and spawned.records == 1
        assert await _ids(store) == ["conv-fork", cid, child.conversation_id]
        await _say(store, fx, child.conversation_id, 9)
        assert (await _matches_its_log(store, child.conversation_id)).records == 2
        assert (await _ids(store))[0] == child.conversation_id

    @case
    async def test_sessions_filter_by_agent_and_instance(self, store: Store, fx: Fixtures) -> None:
        await _open(store, "conv-1", 1)
        await _open(store, "conv-2", 2, instance="globex")
        await _open(store, "conv-3", 3, agent="sales")
        await _open(store, "conv-4", 4, session="other")
        await _open(store, "conv-5", 5, agent="sales", instance="globex")
        assert await _ids(store) == ["conv-5", "conv-4", "conv-3", "conv-2", "conv-1"]
        assert await _ids(store, agent=AGENT) == ["conv-4", "conv-2", "conv-1"]
        assert await _ids(store, agent=AGENT, instance=INSTANCE) == ["conv-4", "conv-1"]
        assert await _ids(store, agent="sales", instance="globex") == ["conv-5"]
        assert await _ids(store, agent="sales", instance="initech") == []
        assert await _ids(store, agent="nobody") == []
        assert await _ids(store, agent="no\x00such") == []
        with pytest.raises(ValueError):  # an instance is one only within its agent
            await store.list_sessions(instance=INSTANCE)

    @case
    async def test_sessions_page_by_cursor(self, store: Store, fx: Fixtures) -> None:
        """Pages read one after another, nothing written between, list every conversation
        once, in order; ties by time are split across pages by id."""
        for n in range(9):  # three at each time: the ties fall across page boundaries
            await _open(store, f"conv-{n}", n // 3, session=f"s{n}", instance=("a", "b")[n % 2])
        for filters in ({}, {"agent": AGENT}, {"agent": AGENT, "instance": "a"}):
            everything = await store.list_sessions(limit=100, **filters)
            for limit in (1, 2, 3, 4):
                paged: list[SessionRow] = []
                after: str | None = None
                while page := await store.list_sessions(limit=limit, after=after, **filters):
                    assert len(page) <= limit
                    paged += page
                    after = page[-1].cursor
                assert paged == everything, (filters, limit)
        assert len(await store.list_sessions()) == 9
        last = (await store.list_sessions())[-1]
        assert await store.list_sessions(after=last.cursor) == []

    @case
    async def test_paging_across_appends(self, store: Store, fx: Fixtures) -> None:
        """An append between pages moves its conversation to the front: none is listed
        twice, and each one not appended to is still listed once."""
        for n in range(6):
            await _open(store, f"conv-{n}", n, session=f"s{n}")
        first = await store.list_sessions(limit=2)
        assert [row.conversation_id for row in first] == ["conv-5", "conv-4"]
        await _say(store, fx, "conv-5", 10)  # already listed
        await _say(store, fx, "conv-1", 11)  # not yet: moves in front of the cursor
        seen = [row.conversation_id for row in first]
        after = first[-1].cursor
        while page := await store.list_sessions(limit=2, after=after):
            seen += [row.conversation_id for row in page]
            after = page[-1].cursor
        assert len(seen) == len(set(seen))
        assert {"conv-0", "conv-2", "conv-3", "conv-4", "conv-5"} <= set(seen)
        assert await _ids(store) == ["conv-1", "conv-5", "conv-4", "conv-3", "conv-2", "conv-0"]

    @case
    async def test_a_bad_sessions_cursor_is_invalid(self, store: Store, fx: Fixtures) -> None:
        await _open(store, "conv-1", 1)
        [row] = await store.list_sessions()
        assert await store.list_sessions(after=row.cursor) == []
        garbage = [
            "",
            "nope!",
            "bm9wZQ",
            row.cursor + "!",
            base64.urlsafe_b64encode(b"1:1:conv-1").decode(),  # a gate's cursor
            base64.urlsafe_b64encode(b"s:1:").decode(),
            base64.urlsafe_b64encode(b"s:x:conv-1").decode(),
            base64.urlsafe_b64encode(b"s: 1:conv-1").decode(),
            base64.urlsafe_b64encode(b"s:99999999999999999999:conv-1").decode(),
            base64.urlsafe_b64encode(b"s:1:conv\x00").decode(),
            base64.urlsafe_b64encode(b"s:\xff:conv-1").decode(),
        ]
        for cursor in garbage:
            with pytest.raises(InvalidCursor):
                await store.list_sessions(after=cursor)
        # A session row's cursor is no gate's.
        with pytest.raises(InvalidCursor):
            await store.list_gates(after=row.cursor)

    # --- erasure --------------------------------------------------------------------

    @case
    async def test_erase_removes_a_session(self, store: Store, fx: Fixtures) -> None:
        """Its records, snapshot, gates, submissions and attempts; nothing of another."""
        first = await fx.claim(await fx.admit())
        cid = first.conversation_id
        await store.release(first.id, attempt_id=str(first.attempt_id))
        running = await fx.claim(first)
        second = await fx.admit(body="again")
        gate = _draft(fx, 1, _gate(cid, 2), execution_id="exe-1")
        await _append(store, cid, gate, _draft(fx, 2), fence=running.fence)
        await store.put_snapshot(cid, seq=3, body=b"snap")
        other = await fx.claim(await fx.admit("other"))
        ocid = other.conversation_id
        gate = _draft(fx, 1, _gate(ocid, 2), execution_id="exe-1")
        await _append(store, ocid, gate, fence=other.fence)
        await store.put_snapshot(ocid, seq=2, body=b"other")
        kept_other = [await store.get_submission(other.id), await store.list_attempts(other.id)]
        assert len(await store.list_gates()) == 2
        conversation = await store.get_conversation(cid)

        erased = await store.erase_session(cid)
        assert (erased.conversation_id, erased.key) == (cid, fx.key())
        assert (erased.records, erased.submissions, erased.snapshot) == (3, 2, True)
        assert erased.attachments == ()
        await _nothing_of(store, conversation)
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
        assert await _ids(store) == [ocid]
        with pytest.raises(ConversationNotFound):
            await store.erase_session(cid)

    @case
    async def test_erase_counts_what_it_removed(self, store: Store, fx: Fixtures) -> None:
        cid = await _open(store, "conv-1")
        await fx.fill(cid, 4)
        erased = await store.erase_session(cid)
        assert (erased.records, erased.submissions, erased.snapshot) == (5, 0, False)
        with pytest.raises(ConversationNotFound):
            await store.erase_session("conv-absent")

    @case
    async def test_an_erased_session_key_is_free_again(self, store: Store, fx: Fixtures) -> None:
        """A new admission (even with the dispatch id of an erased one) starts afresh."""
        new = fx.new(dispatch_id="dispatch-1")
        old = (await store.admit(new)).submission
        await _say(store, fx, old.conversation_id, 1)
        await store.erase_session(old.conversation_id)
        again = dataclasses.replace(new, id="sub-again", conversation_id="conv-again")
        admission = await store.admit(again)
        assert admission.created
        assert admission.submission.id == "sub-again"
        assert admission.submission.conversation_id == "conv-again"
        assert (await store.find_conversation(fx.key())).id == "conv-again"
        assert await store.head("conv-again") == 1
        assert await store.verify("conv-again") == 1
        assert await _ids(store) == ["conv-again"]
        # A conversation may take the erased one's id again, too.
        await store.erase_session("conv-again")
        await _open(store, old.conversation_id, 3)
        [created] = await store.read(old.conversation_id)
        assert (created.seq, created.id, created.time) == (
            1,
            old.conversation_id,
            format_time(fx.at(3)),
        )
        assert await store.verify(old.conversation_id) == 1

    @case
    async def test_erase_removes_the_attachments_only_its_log_references(
        self, store: Store, fx: Fixtures
    ) -> None:
        """An attachment another conversation's records reference stays: a fork's copied
        records, or another log that was handed the same bytes."""
        a, b, c, d = [
            await store.put_attachment(f"bytes {name}".encode(), media_type="text/plain")
            for name in "abcd"
        ]
        absent = AttachmentRef(digest="sha256:" + "0" * 64, media_type="text/plain", size=1)
        one = await _open(store, "conv-1", session="one")
        await _append(store, one, _draft(fx, 1, _said(a, b, a)))
        await _append(
            store, one, _draft(fx, 2, SteerReceived(body="see", mode="steer", attachments=(c,)))
        )
        await _append(store, one, _draft(fx, 3, _said(absent)))  # referenced, never stored
        fork = await store.fork(
            one, at_seq=2, key=fx.key("fork"), new_conversation_id="conv-fork", created_at=fx.at(4)
        )
        other = await fx.claim(await fx.admit("other"))
        await store.append_settled(
            other.conversation_id,
            [_draft(fx, 5, _said(b))],
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

    @case
    async def test_an_attachment_referenced_again_after_an_erase_is_kept(
        self, store: Store, fx: Fixtures
    ) -> None:
        ref = await store.put_attachment(b"shared", media_type="text/plain")
        one = await _open(store, "conv-1", session="one")
        two = await _open(store, "conv-2", session="two")
        await _say(store, fx, one, 1, ref)
        await _say(store, fx, one, 2, ref)  # twice in one log
        await _say(store, fx, two, 3, ref)
        assert (await store.erase_session(two)).attachments == ()
        assert (await store.get_attachment(ref.digest))[0] == ref
        assert (await store.erase_session(one)).attachments == (ref.digest,)
        with pytest.raises(AttachmentNotFound):
            await store.get_attachment(ref.digest)
        # Put again, and referenced by a new log: it belongs to that one now.
        assert await store.put_attachment(b"shared", media_type="text/plain") == ref
        three = await _open(store, "conv-3", session="three")
        await _say(store, fx, three, 4, ref)
        assert (await store.erase_session(three)).attachments == (ref.digest,)

    # --- import ---------------------------------------------------------------------

    @case
    async def test_an_exported_log_imports_into_another_store(
        self, store: Store, fx: Fixtures
    ) -> None:
        """A log read from one store (the reference here) comes back whole in another, and
        from the store under test into the reference: the same records, head and index
        rows; its gates are listed; it takes appends as any other."""
        async with MemoryStore() as source:
            ref = await source.put_attachment(b"pic", media_type="image/png")
            cid = await _open(source, "conv-1", 1)
            await _append(source, cid, _draft(fx, 2, _said(ref)), _draft(fx, 3))
            await _append(source, cid, _draft(fx, 4, _gate(cid, 4), execution_id="exe-1"))
            conversation, records = await _export(source, cid)
            assert await store.import_conversation(conversation, records) is True
            assert await _export(store, cid) == (conversation, records)
            assert await store.find_conversation(conversation.key) == conversation
            assert await store.verify(cid) == await store.head(cid) == 4
            assert await store.list_sessions() == await source.list_sessions()
            assert await store.list_gates() == await source.list_gates()
            await store.put_attachment(b"pic", media_type="image/png")
            await _append(store, cid, _draft(fx, 5))
            assert await store.verify(cid) == 5
            assert (await store.erase_session(cid)).attachments == (ref.digest,)

        async with MemoryStore() as target:
            submission = await fx.claim(await fx.admit())
            drafts = (_draft(fx, 1), _draft(fx, 2))
            await _append(store, submission.conversation_id, *drafts, fence=submission.fence)
            conversation, records = await _export(store, submission.conversation_id)
            assert await target.import_conversation(conversation, records) is True
            assert await _export(target, conversation.id) == (conversation, records)
            assert await target.list_sessions() == await store.list_sessions()

    @case
    async def test_an_identical_reimport_is_a_no_op(self, store: Store, fx: Fixtures) -> None:
        cid = await _open(store, "conv-1")
        await fx.fill(cid, 3)
        conversation, records = await _export(store, cid)
        assert await store.import_conversation(conversation, records) is False
        assert await store.import_conversation(conversation, records) is False
        assert await _export(store, cid) == (conversation, records)

    @case
    async def test_a_shorter_or_longer_log_under_a_kept_id_is_refused(
        self, store: Store, fx: Fixtures
    ) -> None:
        cid = await _open(store, "conv-1")
        await fx.fill(cid, 3)
        conversation, records = await _export(store, cid)
        with pytest.raises(SessionExists):
            await store.import_conversation(conversation, records[:2])
        async with MemoryStore() as source:
            await source.import_conversation(conversation, records)
            await fx.fill(cid, 1)  # the store's log moves on; the source's is behind it now
            with pytest.raises(SessionExists):
                await store.import_conversation(conversation, records)
            await _say(source, fx, cid, 9)  # and a different record 5
            with pytest.raises(SessionExists):
                await store.import_conversation(*await _export(source, cid))
        assert await store.verify(cid) == 5

    @case
    async def test_a_tampered_log_is_refused_and_nothing_written(
        self, store: Store, fx: Fixtures
    ) -> None:
        async with MemoryStore() as source:
            cid = await _open(source, "conv-1", session="s")
            await _append(
                source, cid, *(_draft(fx, n, UserMessage(body="hello")) for n in range(4))
            )
            conversation, records = await _export(source, cid)
        third, fourth = records[2], records[3]
        changed = _forged(third, canonical=third.canonical.replace(b"hello", b"HELLO"))
        tampered = {
            3: [*records[:2], changed, *records[3:]],
            4: [*records[:3], _forged(fourth, hash="0" * 64), *records[4:]],
            5: [*records[:4], _forged(records[4], canonical=records[4].canonical + b" ")],
            2: [records[0], *records[2:]],  # a record missing
            1: records[1:],  # no conversation_created
        }
        for seq, forged in tampered.items():
            with pytest.raises(LogTampered) as raised:
                await store.import_conversation(conversation, forged)
            assert raised.value.seq == seq
            await _nothing_of(store, conversation)
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
            await _nothing_of(store, other)
        assert await store.list_sessions() == []
        assert await store.list_gates() == []
        assert await store.import_conversation(conversation, records) is True

    @case
    async def test_a_long_log_streams_in_and_a_late_failure_writes_nothing(
        self, store: Store, fx: Fixtures
    ) -> None:
        """``records`` may be a generator (a file read line by line): it is iterated once,
        and written in batches inside one transaction. A record that fails after several
        batches went in, or the generator's own error after the last record (a reader that
        finds the file's trailer disagrees), leaves nothing of the conversation."""
        async with MemoryStore() as source:
            cid = await _open(source, "conv-1", session="long")
            body = "x" * 5_000  # batches close on their bytes, not only on their count
            for start in range(1, 1_100, 100):
                said = [UserMessage(body=f"{n} {body}") for n in range(100)]
                await _append(source, cid, *(_draft(fx, start + n, p) for n, p in enumerate(said)))
            await _append(source, cid, _draft(fx, 1_200, _gate(cid, 4), execution_id="exe-1"))
            conversation, records = await _export(source, cid)
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

        late = _forged(records[-2], canonical=records[-2].canonical.replace(b"x", b"y", 1))
        with pytest.raises(LogTampered) as raised:
            await store.import_conversation(conversation, streamed([*records[:-2], late]))
        assert raised.value.seq == len(records) - 1
        await _nothing_of(store, conversation)
        with pytest.raises(ValueError, match="the trailer disagrees"):
            await store.import_conversation(
                conversation, streamed(records, then=ValueError("the trailer disagrees"))
            )
        await _nothing_of(store, conversation)
        assert await store.list_sessions() == [] and await store.list_gates() == []

        taken.clear()
        assert await store.import_conversation(conversation, streamed(records)) is True
        assert taken == [record.seq for record in records]  # once, in order
        assert await _export(store, cid) == (conversation, records)
        assert await store.verify(cid) == len(records)
        assert await store.list_sessions() == expected_sessions
        assert await store.list_gates() == expected_gates
        taken.clear()
        assert await store.import_conversation(conversation, streamed(records)) is False
        assert taken == [record.seq for record in records]

    @case
    async def test_an_import_of_a_taken_key_or_id_is_refused(
        self, store: Store, fx: Fixtures
    ) -> None:
        async with MemoryStore() as source:
            await _open(source, "conv-1", session="taken")
            await _open(source, "conv-2", session="free")
            taken_key = await _export(source, "conv-1")
            taken_id = await _export(source, "conv-2")
        await _open(store, "conv-other", session="taken")
        await _open(store, "conv-2", session="elsewhere")
        for conversation, records in (taken_key, taken_id):
            with pytest.raises(SessionExists):
                await store.import_conversation(conversation, records)
        with pytest.raises(ConversationNotFound):
            await store.get_conversation("conv-1")
        with pytest.raises(ConversationNotFound):
            await store.find_conversation(fx.key("free"))
        assert await store.head("conv-2") == 1
        assert sorted(await _ids(store)) == ["conv-2", "conv-other"]

    @case
    async def test_a_fork_and_a_child_import_with_their_parent_link(
        self, store: Store, fx: Fixtures
    ) -> None:
        """A fork's log begins with its parent's records, verbatim: their gates stay the
        parent's, their attachments are the fork's too."""
        ref = await store.put_attachment(b"pic", media_type="image/png")
        async with MemoryStore() as source:
            sfx = Fixtures(source)
            root = await sfx.admit("root")
            cid = root.conversation_id
            await _append(source, cid, _draft(fx, 1, _said(ref)))
            await _append(source, cid, _draft(fx, 2, _gate(cid, 3), execution_id="exe-1"))
            fork = await source.fork(
                cid, at_seq=3, key=fx.key("fork"), new_conversation_id="conv-f", created_at=fx.at(5)
            )
            await _say(source, fx, fork.id, 6)
            task = TaskParent(root.id, cid, 2, "call-1")
            child = await sfx.admit("task", parent=task)
            exported = [await _export(source, one) for one in (cid, fork.id, child.conversation_id)]
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
                assert await _export(store, conversation.id) == (conversation, records)
                assert await store.verify(conversation.id) == len(records)
            assert await store.list_sessions() == await source.list_sessions()
        row = await _row(store, fork.id)
        assert row.parent == fork.parent and row.records == 5
        assert (await _row(store, child.conversation_id)).parent == task.conversation_parent()
        assert (await store.erase_session(cid)).attachments == ()  # the fork's copy keeps it
        assert (await store.erase_session(fork.id)).attachments == (ref.digest,)

    # --- schedules ------------------------------------------------------------------

    @case
    async def test_put_schedule_is_idempotent(self, store: Store, fx: Fixtures) -> None:
        definition: dict[str, Any] = {"cron": "0 9 * * *", "agent": "support", "n": [1, 2.5]}
        kept = await store.put_schedule(ScheduleRow("sched-1", definition, fx.at(1)))
        assert kept == ScheduleRow("sched-1", definition, fx.at(1))
        again = await store.put_schedule(ScheduleRow("sched-1", dict(definition), fx.at(9)))
        assert again == kept  # the one kept, with its own time
        with pytest.raises(DispatchConflict):
            await store.put_schedule(ScheduleRow("sched-1", {**definition, "n": []}, fx.at(1)))
        assert await store.list_schedules() == [kept]
        listed = await store.list_schedules()
        listed[0].definition["cron"] = "changed"  # type: ignore[index]
        assert await store.list_schedules() == [kept]

    @case
    async def test_schedules_are_listed_oldest_first(self, store: Store, fx: Fixtures) -> None:
        assert await store.list_schedules() == []
        for sid, at in (("sched-b", 2), ("sched-c", 1), ("sched-a", 2), ("sched-d", 3)):
            await store.put_schedule(ScheduleRow(sid, {"id": sid}, fx.at(at)))
        listed = await store.list_schedules()
        assert [row.id for row in listed] == ["sched-c", "sched-a", "sched-b", "sched-d"]
        assert [row.created_at for row in listed] == [fx.at(1), fx.at(2), fx.at(2), fx.at(3)]
        assert listed[0].definition == {"id": "sched-c"}

    @case
    async def test_delete_schedule(self, store: Store, fx: Fixtures) -> None:
        await store.put_schedule(ScheduleRow("sched-1", {"every": 60}, fx.at(1)))
        await store.put_schedule(ScheduleRow("sched-2", {"every": 5}, fx.at(2)))
        assert await store.delete_schedule("sched-1") is True
        assert await store.delete_schedule("sched-1") is False
        assert await store.delete_schedule("sched-absent") is False
        assert [row.id for row in await store.list_schedules()] == ["sched-2"]
        # Deleted, the id takes another definition.
        await store.delete_schedule("sched-2")
        assert await store.put_schedule(ScheduleRow("sched-2", {"every": 1}, fx.at(3))) == (
            ScheduleRow("sched-2", {"every": 1}, fx.at(3))
        )
