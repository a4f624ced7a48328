"""Notes: a value a harness keeps for its next execution rides with the execution's end (no
commit of its own), is read back by the next one (``last_note``), from a fork's copied
records too, passes over an abandoned execution, and replays only as recorded."""

from pathlib import Path

import pytest
from pydantic import JsonValue

from tether.errors import ReplayDiverged
from tether.journal import Journal, Mode, Turn
from tether.journal._recorded import Recorded
from tether.journal._unread import unread_prefix
from tether.records import StepRecorded, UserMessage
from tether.store import SessionKey, SqliteStore, Store

STATE = "test.count"


class Counter:
    """Counts its executions in a note; answers with the count."""

    name, version = "counter", "1"

    def __init__(self, bump: int = 1) -> None:
        self.bump = bump

    async def run(self, turn: Turn) -> JsonValue:
        before = await turn.last_note(STATE)
        count = (before if isinstance(before, int) else 0) + self.bump
        await turn.note(STATE, count)
        return count


async def session(store: Store, name: str = "s") -> Journal:
    return await Journal.open_session(store, SessionKey("notes", "acme", name))


async def test_a_note_is_read_by_the_next_execution(store: Store) -> None:
    journal = await session(store)
    outputs = [(await journal.exec(Counter(), [UserMessage(body="n")])).output for _ in "abc"]
    assert outputs == [1, 2, 3]
    records = await store.read(journal.conversation.id)
    notes = [r for r in records if r.kind == StepRecorded.KIND]
    # Each is its execution's last effect, just before its end.
    assert [records[r.seq].kind for r in notes] == ["execution_ended"] * 3
    replayed = await (await Journal.open(store, journal.conversation.id, fence=0)).replay(Counter())
    assert replayed == [1, 2, 3]


async def test_a_note_takes_no_commit_of_its_own(tmp_path: Path) -> None:
    class Plain:
        name, version = "plain", "1"

        async def run(self, turn: Turn) -> JsonValue:
            return 1

    async with await SqliteStore.open(tmp_path) as store:
        used = []
        for harness in (Plain(), Counter()):
            journal = await session(store, harness.name)
            before = store.commits
            await journal.exec(harness, [UserMessage(body="n")])
            used.append(store.commits - before)
        assert used[0] == used[1]  # the note rode with the execution's end


async def test_a_replay_that_notes_another_value_diverges(store: Store) -> None:
    journal = await session(store)
    await journal.exec(Counter(), [UserMessage(body="n")])
    replaying = await Journal.open(store, journal.conversation.id, fence=0)
    with pytest.raises(ReplayDiverged, match=f"note {STATE} differs from the recorded one"):
        await replaying.replay(Counter(bump=2))


async def test_a_fork_reads_its_parents_note_at_the_cut(store: Store) -> None:
    journal = await session(store)
    await journal.exec(Counter(), [UserMessage(body="n")])
    first_end = len(await store.read(journal.conversation.id))
    await journal.exec(Counter(), [UserMessage(body="n")])
    child = await journal.fork(first_end, SessionKey("notes", "acme", "fork"))
    forked = await Journal.open(store, child.id, fence=1)
    assert (await forked.exec(Counter(), [UserMessage(body="n")])).output == 2


async def test_a_note_a_lean_view_has_not_read_is_read_from_the_store(store: Store) -> None:
    journal = await session(store)
    for _ in "ab":
        await journal.exec(Counter(), [UserMessage(body="n")])
    view = await journal.refresh()
    # As a view started from a snapshot holds the executions before the latest one.
    placeholders = unread_prefix(view.head, {})
    for execution in view.executions.by_id.values():
        execution.effects = [placeholders[r.seq - 1] for r in execution.effects]
    turn = journal._turn(Mode.LIVE, "next", Recorded(), [], [], None)
    assert await turn.last_note(STATE) == 2


async def test_none_before_any_note(store: Store) -> None:
    class Reader:
        name, version = "reader", "1"

        async def run(self, turn: Turn) -> JsonValue:
            return await turn.last_note(STATE)

    journal = await session(store)
    assert (await journal.exec(Reader(), [UserMessage(body="n")])).output is None
