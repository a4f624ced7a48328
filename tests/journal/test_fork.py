"""Fork: shared prefix hashes, replay of the prefix, refusal of inherited intents."""

import pytest

from tether.errors import InheritedToolIntent
from tether.journal import Journal
from tether.store import SessionKey, Store
from tether.testing import CountingModel, RecordingTools

from .harnesses import EchoHarness, LoopHarness, journal, new_conversation, planning_model, user


async def test_fork_shares_the_prefix_and_continues(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=CountingModel())
    await j.exec(EchoHarness(), [user("one")])
    head = await store.head(cid)
    await j.exec(EchoHarness(), [user("two")])
    child = await j.fork(head, SessionKey("agent", "inst", "what-if"))
    parent_records, child_records = await store.read(cid), await store.read(child.id)
    assert [r.hash for r in child_records[:head]] == [r.hash for r in parent_records[:head]]
    assert child_records[head].prev_hash == parent_records[head - 1].hash
    assert await (await Journal.open(store, child.id, fence=0)).replay(EchoHarness()) == ["resp#1"]
    branch = await journal(store, child.id, model=CountingModel())
    assert (await branch.exec(EchoHarness(), [user("other")])).output == "resp#1"
    assert await store.verify(child.id) == head + 1 + 5
    assert len(await store.read(cid)) == len(parent_records)  # the parent is untouched


async def test_an_inherited_unresolved_intent_is_refused(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=planning_model(), tools=RecordingTools())).exec(
        LoopHarness(), [user("charge")]
    )
    records = await store.read(cid)
    cut = next(r.seq for r in records if r.kind == "tool_called")
    j = await journal(store, cid)
    child = await j.fork(cut, SessionKey("agent", "inst", "child"))
    tools = RecordingTools()
    child_journal = await journal(store, child.id, model=planning_model(), tools=tools)
    head = await store.head(child.id)
    with pytest.raises(InheritedToolIntent):
        await child_journal.resume(LoopHarness())
    assert await store.head(child.id) == head and not tools.calls
    result = await child_journal.exec(LoopHarness(), [user("lookup instead")])  # the escape
    # The inherited call is closed first (as repair_cut would), then the new turn's runs.
    assert result.output == "done after 2 tool results"


async def test_repair_cut_answers_every_call_the_cut_left_open_once(store: Store) -> None:
    cid = await new_conversation(store)
    parent = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    await parent.exec(LoopHarness(), [user("lookup then charge")])  # one batch of two calls
    records = await store.read(cid)
    cut = next(r.seq for r in records if r.kind == "tool_called")  # the first call's intent
    child = await j_fork(store, cid, cut, "child")
    repairs = await child.repair_cut()
    assert [r.kind for r in repairs] == ["tool_outcome", "tool_outcome"]
    assert [r.seq for r in repairs] == [cut + 2, cut + 3] and all(
        r.execution_id is None for r in repairs
    )
    outcomes = [r.payload.to_json_object() for r in repairs]
    assert [o["callId"] for o in outcomes] == ["call-1-0", "call-1-1"]  # the second never ran
    assert {o["status"] for o in outcomes} == {"unknown"}
    messages = (await child.refresh()).messages()
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool"]
    assert await child.repair_cut() == []  # nothing left open
    with pytest.raises(InheritedToolIntent):  # the copied execution stays the parent's
        await child.resume(LoopHarness())


async def test_repair_cut_closes_a_message_cut_mid_stream(store: Store) -> None:
    cid = await new_conversation(store)
    parent = await journal(store, cid, model=planning_model(chunk=3))
    await parent.exec(EchoHarness(), [user("hello")])
    records = await store.read(cid)
    cut = next(r.seq for r in records if r.kind == "assistant_text_delta")
    child = await j_fork(store, cid, cut, "child")
    [closing] = await child.repair_cut()
    assert closing.kind == "assistant_message_completed"
    assert closing.payload.to_json_object()["interrupted"] is True
    assert await child.repair_cut() == []


async def test_a_clean_cut_or_a_log_that_is_no_fork_needs_no_repair(store: Store) -> None:
    cid = await new_conversation(store)
    parent = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    await parent.exec(LoopHarness(), [user("lookup")])
    assert await parent.repair_cut() == []
    outcome = next(r.seq for r in await store.read(cid) if r.kind == "tool_outcome")
    child = await j_fork(store, cid, outcome, "child")
    assert await child.repair_cut() == []
    assert await store.head(child.conversation.id) == outcome + 1


async def j_fork(store: Store, cid: str, at_seq: int, session: str) -> Journal:
    """The journal of a fork of ``cid`` at ``at_seq``, opened as Runtime.fork opens it."""
    conversation = await (await journal(store, cid)).fork(
        at_seq, SessionKey("agent", "inst", session)
    )
    return await Journal.open(store, conversation.id, fence=0)
