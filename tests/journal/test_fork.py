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
    assert result.output == "done after 1 tool results"
