"""The kept view of a log: what a resume is given as history."""

from __future__ import annotations

from pydantic import JsonValue

from tether.journal import Journal, LogView, Turn, transcript
from tether.messages import ModelRequest
from tether.store import MemoryStore, Store
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
