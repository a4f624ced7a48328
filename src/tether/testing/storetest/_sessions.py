"""Conformance cases for the ``sessions`` capability: the sessions index
(``SessionListStore.list_sessions``).

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
from datetime import datetime
from typing import Any

import pytest

from tether.errors import InvalidCursor
from tether.records import ConversationParent, UserMessage
from tether.store import ClaimSettlement, SessionRow, TaskParent
from tether.testing.storetest._base import (
    AGENT,
    INSTANCE,
    BaseConformance,
    CompleteStore,
    Fixtures,
    case,
    needs,
)
from tether.testing.storetest._records import (
    append_all,
    draft_at,
    export_log,
    open_conversation,
    say,
)

__all__ = ("SessionListCases", "listed_ids", "listed_row", "matches_its_log")


async def listed_ids(store: CompleteStore, **filters: Any) -> list[str]:
    return [row.conversation_id for row in await store.list_sessions(limit=10_000, **filters)]


async def listed_row(store: CompleteStore, cid: str) -> SessionRow:
    [row] = [row for row in await store.list_sessions(limit=10_000) if row.conversation_id == cid]
    return row


async def _expected_row(store: CompleteStore, cid: str) -> SessionRow:
    """The row of ``cid`` as its log says it must be (but for the cursor)."""
    conversation, records = await export_log(store, cid)
    return SessionRow(
        conversation_id=cid,
        key=conversation.key,
        created_at=conversation.created_at,
        last_activity_at=datetime.fromisoformat(records[-1].time),
        records=records[-1].seq,
        bytes=sum(len(record.canonical) for record in records),
        parent=conversation.parent,
    )


async def matches_its_log(store: CompleteStore, cid: str) -> SessionRow:
    row = await listed_row(store, cid)
    assert row.cursor
    assert dataclasses.replace(row, cursor="") == await _expected_row(store, cid)
    return row


@needs("sessions")
class SessionListCases(BaseConformance):
    """The sessions index: newest activity first, filters, cursors, rows that track their logs."""

    @case
    async def test_sessions_are_listed_newest_activity_first(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        """By the time of each log's last record, then by conversation id (ties)."""
        assert await store.list_sessions() == []
        await open_conversation(store, "conv-z", 2, session="z")
        await open_conversation(store, "conv-m", 2, session="m")
        await open_conversation(store, "conv-a", 1, session="a")
        await open_conversation(store, "conv-q", 3, session="q")
        assert await listed_ids(store) == ["conv-q", "conv-m", "conv-z", "conv-a"]
        await say(store, fx, "conv-a", 5)
        assert await listed_ids(store) == ["conv-a", "conv-q", "conv-m", "conv-z"]
        await say(store, fx, "conv-z", 3)  # as late as conv-q's last: by id, then
        assert await listed_ids(store) == ["conv-a", "conv-q", "conv-z", "conv-m"]
        # A record drafted before its predecessor takes its time: the activity never goes back.
        await say(store, fx, "conv-a", 0)
        assert (await listed_row(store, "conv-a")).last_activity_at == fx.at(5)
        assert await listed_ids(store) == ["conv-a", "conv-q", "conv-z", "conv-m"]
        assert [row.conversation_id for row in await store.list_sessions(limit=2)] == [
            "conv-a",
            "conv-q",
        ]
        with pytest.raises(ValueError):
            await store.list_sessions(limit=0)

    @needs("children", "gates")
    @case
    async def test_a_session_row_tracks_its_log(self, store: CompleteStore, fx: Fixtures) -> None:
        """Its records, bytes and last activity are those of its log after every kind of
        append: a plain one, one that settles a claim, a decision."""
        submission = await fx.claim(await fx.admit())
        cid = submission.conversation_id
        row = await matches_its_log(store, cid)
        assert (row.records, row.key, row.created_at, row.parent) == (1, fx.key(), fx.at(0), None)
        assert row.last_activity_at == fx.at(0)
        await append_all(
            store,
            cid,
            draft_at(fx, 4),
            draft_at(fx, 5, UserMessage(body="x" * 500)),
            fence=submission.fence,
        )
        row = await matches_its_log(store, cid)
        assert (row.records, row.last_activity_at) == (3, fx.at(5))
        await store.append_decision(
            cid, [draft_at(fx, 6)], expected_seq=await store.head(cid), wake=None
        )
        assert (await matches_its_log(store, cid)).records == 4
        settle = ClaimSettlement(submission.id, str(submission.attempt_id), {"ok": True}, fx.at(9))
        await store.append_settled(
            cid,
            [draft_at(fx, 7)],
            expected_seq=await store.head(cid),
            fence=submission.fence,
            settle=settle,
        )
        row = await matches_its_log(store, cid)
        assert (row.records, row.last_activity_at) == (5, fx.at(7))
        assert row.bytes > 500

    @needs("children", "forks")
    @case
    async def test_forks_and_task_children_are_listed_with_their_parent(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        root = await fx.claim(await fx.admit("root"))
        cid = root.conversation_id
        await append_all(
            store, cid, draft_at(fx, 1), draft_at(fx, 2), draft_at(fx, 3), fence=root.fence
        )
        fork = await store.fork(
            cid, at_seq=3, key=fx.key("fork"), new_conversation_id="conv-fork", created_at=fx.at(8)
        )
        task = TaskParent(root.id, cid, 4, "call-1")
        child = await fx.admit("task", parent=task)
        forked = await matches_its_log(store, fork.id)
        assert forked.parent == ConversationParent(conversation_id=cid, seq=3, reason="fork")
        assert forked.records == 4 and forked.last_activity_at == fx.at(8)
        spawned = await matches_its_log(store, child.conversation_id)
        assert spawned.parent == task.conversation_parent() and spawned.records == 1
        assert await listed_ids(store) == ["conv-fork", cid, child.conversation_id]
        await say(store, fx, child.conversation_id, 9)
        assert (await matches_its_log(store, child.conversation_id)).records == 2
        assert (await listed_ids(store))[0] == child.conversation_id

    @case
    async def test_sessions_filter_by_agent_and_instance(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await open_conversation(store, "conv-1", 1)
        await open_conversation(store, "conv-2", 2, instance="globex")
        await open_conversation(store, "conv-3", 3, agent="sales")
        await open_conversation(store, "conv-4", 4, session="other")
        await open_conversation(store, "conv-5", 5, agent="sales", instance="globex")
        assert await listed_ids(store) == ["conv-5", "conv-4", "conv-3", "conv-2", "conv-1"]
        assert await listed_ids(store, agent=AGENT) == ["conv-4", "conv-2", "conv-1"]
        assert await listed_ids(store, agent=AGENT, instance=INSTANCE) == ["conv-4", "conv-1"]
        assert await listed_ids(store, agent="sales", instance="globex") == ["conv-5"]
        assert await listed_ids(store, agent="sales", instance="initech") == []
        assert await listed_ids(store, agent="nobody") == []
        assert await listed_ids(store, agent="no\x00such") == []
        with pytest.raises(ValueError):  # an instance is one only within its agent
            await store.list_sessions(instance=INSTANCE)

    @case
    async def test_sessions_page_by_cursor(self, store: CompleteStore, fx: Fixtures) -> None:
        """Pages read one after another, nothing written between, list every conversation
        once, in order; ties by time are split across pages by id."""
        for n in range(9):  # three at each time: the ties fall across page boundaries
            await open_conversation(
                store, f"conv-{n}", n // 3, session=f"s{n}", instance=("a", "b")[n % 2]
            )
        every: tuple[dict[str, Any], ...] = (
            {},
            {"agent": AGENT},
            {"agent": AGENT, "instance": "a"},
        )
        for filters in every:
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
    async def test_paging_across_appends(self, store: CompleteStore, fx: Fixtures) -> None:
        """An append between pages moves its conversation to the front: none is listed
        twice, and each one not appended to is still listed once."""
        for n in range(6):
            await open_conversation(store, f"conv-{n}", n, session=f"s{n}")
        first = await store.list_sessions(limit=2)
        assert [row.conversation_id for row in first] == ["conv-5", "conv-4"]
        await say(store, fx, "conv-5", 10)  # already listed
        await say(store, fx, "conv-1", 11)  # not yet: moves in front of the cursor
        seen = [row.conversation_id for row in first]
        after = first[-1].cursor
        while page := await store.list_sessions(limit=2, after=after):
            seen += [row.conversation_id for row in page]
            after = page[-1].cursor
        assert len(seen) == len(set(seen))
        assert {"conv-0", "conv-2", "conv-3", "conv-4", "conv-5"} <= set(seen)
        assert await listed_ids(store) == [
            "conv-1",
            "conv-5",
            "conv-4",
            "conv-3",
            "conv-2",
            "conv-0",
        ]

    @needs("gates")
    @case
    async def test_a_bad_sessions_cursor_is_invalid(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        await open_conversation(store, "conv-1", 1)
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
