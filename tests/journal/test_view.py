"""The kept view of a log: what a resume is given as history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import JsonValue

from tether.errors import Conflict, ConversationNotFound
from tether.journal import Journal, LogView, Turn, transcript
from tether.messages import ModelRequest
from tether.records import Record
from tether.store import MemoryStore, SessionKey, Store
from tether.testing import copy_prefix

from .harnesses import EchoHarness, journal, new_conversation, planning_model, user


class CompactingHarness:
    """Asks the model, compacts down to its last message, asks again."""

    name, version = "compacting", "1"

    async def run(self, turn: Turn) -> JsonValue:
        messages = (*turn.history, *turn.inputs)
        first = await turn.model(ModelRequest(model="test", messages=messages))
        await turn.compact("so far: greetings", keep=1, reason="threshold")
        again = (*messages, first.message)
        return (await turn.model(ModelRequest(model="test", messages=again))).message.text


async def test_history_before_the_latest_execution_is_the_log_up_to_its_start(
    store: Store,
) -> None:
    """Kept as the transcript is built, and equal to transcribing the records before the
    start, also when the execution itself compacted (its compaction is not history yet)."""
    cid = await new_conversation(store)
    live = await journal(store, cid, model=planning_model())
    for text in ("hello", "again"):
        await live.exec(EchoHarness(), [user(text)])
    await live.exec(CompactingHarness(), [user("and once more")])
    records = await store.read(cid)
    cut = MemoryStore()
    await copy_prefix(store, cid, records[-2].seq, cut)  # before the end: it is pending
    resumed = await Journal.open(cut, cid)
    view = await resumed.refresh()
    pending = view.latest
    assert pending is not None and not pending.completed
    assert any(r.kind == "compaction" for r in records[pending.start_index :])
    view.messages()  # the transcript is built, and it passed the start
    expected = transcript(view.records[: pending.start_index])
    assert view.history_before(pending) == expected
    assert LogView().history_before(pending) == []  # a view that holds no records yet


async def test_a_new_view_reads_its_conversation_from_the_log(store: Store) -> None:
    """No lookup of its own: the conversation comes from its own ``conversation_created``,
    the fork marker in a fork, and equals the store's."""
    cid = await new_conversation(store)
    parent = await journal(store, cid, model=planning_model())
    await parent.exec(EchoHarness(), [user("hello")])
    child = await parent.fork(await store.head(cid), SessionKey("agent", "inst", "what-if"))
    for conversation_id in (cid, child.id):
        view = LogView()
        opened = await Journal.open(store, conversation_id, fence=0, view=view)
        assert view.conversation == opened.conversation
        assert view.conversation == await store.get_conversation(conversation_id)
    with pytest.raises(ConversationNotFound):
        await Journal.open(store, "conv-absent", fence=0, view=LogView())


class _CountingReads(MemoryStore):
    reads = 0

    async def read(
        self, conversation_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> list[Record]:
        self.reads += 1
        return await super().read(conversation_id, after_seq=after_seq, limit=limit)


async def test_exec_at_the_views_own_head_reads_nothing_more() -> None:
    store = _CountingReads()
    cid = await new_conversation(store)
    live = await journal(store, cid, model=planning_model())
    head = (await live.refresh()).head
    before = store.reads
    await live.exec(EchoHarness(), [user("hello")], expected_seq=head)
    assert store.reads == before
    await live.exec(EchoHarness(), [user("again")])  # no head given: brought up to date
    assert store.reads == before + 1
    with pytest.raises(Conflict):  # a stale head is refused, and nothing runs
        await live.exec(EchoHarness(), [user("stale")], expected_seq=head)


class _StoreCalls:
    """Counts the log reads and head lookups made through ``store``."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for name in ("read", "head"):
            real = getattr(store, name)

            def counted(
                *args: Any, _real: Callable[..., Any] = real, _name: str = name, **kw: Any
            ) -> Any:
                self.calls.append(_name)
                return _real(*args, **kw)

            monkeypatch.setattr(store, name, counted)


async def test_a_lean_journal_on_a_short_log_costs_one_read_and_no_head_lookup(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's first look at a claimed session: its first records are the whole log, so
    the head is not asked for (on PostgreSQL, a round trip per claim saved)."""
    cid = await new_conversation(store)
    live = await journal(store, cid, model=planning_model())
    await live.exec(EchoHarness(), [user("hello")])
    calls = _StoreCalls(store, monkeypatch)
    opened = await Journal.open(store, cid, fence=1, view=LogView(), lean=True)
    assert calls.calls == ["read"]
    assert opened.view.head == len(await store.read(cid)) == opened.head


async def test_a_lean_journal_on_a_longer_log_asks_its_head_and_reads_it_whole(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    cid = await new_conversation(store)
    live = await journal(store, cid, model=planning_model())
    while live.head <= 128:  # past the first read's size: the log may be long enough to snapshot
        await live.exec(EchoHarness(), [user("hello")])
    calls = _StoreCalls(store, monkeypatch)
    opened = await Journal.open(store, cid, fence=1, view=LogView(), lean=True)
    assert calls.calls[:2] == ["read", "head"]
    assert opened.view.records == await store.read(cid, limit=5000)


async def test_a_lean_journal_of_an_unknown_conversation_is_not_found(store: Store) -> None:
    with pytest.raises(ConversationNotFound):
        await Journal.open(store, "nope", fence=1, view=LogView(), lean=True)
