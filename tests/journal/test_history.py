"""Transcripts of a log's prefixes, as a replay asks for them."""

from __future__ import annotations

from tether.journal import Journal, transcript
from tether.journal._history import PrefixTranscripts, messages_of
from tether.store import MemoryStore
from tether.testing import RecordingTools

from .harnesses import LoopHarness, journal, new_conversation, planning_model, user


async def test_prefix_transcripts_equal_a_fresh_transcript_of_each_prefix() -> None:
    store = MemoryStore()
    cid = await new_conversation(store)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    for text in ("lookup the order", "lookup it again"):
        await j.exec(LoopHarness(), [user(text)])
    records = await (await Journal.open(store, cid, fence=0)).records()
    walk = PrefixTranscripts(records)
    forward = [walk.before(index) for index in range(len(records) + 1)]
    assert forward == [transcript(records[:index]) for index in range(len(records) + 1)]
    # Asked for late, behind the walk: still that prefix's transcript, same objects.
    late = walk.before(3)
    assert late == forward[3] and all(a is b for a, b in zip(late, forward[3], strict=True))


async def test_a_record_stands_for_the_same_message_objects_every_time() -> None:
    store = MemoryStore()
    cid = await new_conversation(store)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    await j.exec(LoopHarness(), [user("lookup it")])
    records = await store.read(cid)
    first, again = messages_of(records), messages_of(records)
    assert first and all(a is b for a, b in zip(first, again, strict=True))
