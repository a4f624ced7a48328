"""A view's snapshot cache: a new view's start from the snapshot (lean or full), keeping one,
and what a kill leaves of it."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import orjson
import pytest

from tether.errors import RecordDecodeError, StoreUnavailable
from tether.journal import Journal, LogView
from tether.store import MemoryStore, SqliteStore
from tether.testing import RecordingTools
from tether.testing.storetest import CompleteStore

from ..kill import killed_repeatedly
from .harnesses import EchoHarness, LoopHarness, new_conversation, planning_model, user
from .snapshots import taken_in, taken_in_lean, varied_log, view_state
from .test_view import CompactingHarness


@pytest.fixture(autouse=True)
def short_logs_get_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot from a few records on, so small logs exercise every path."""
    monkeypatch.setattr("tether.journal._snapshot.MIN_RECORDS", 4)


async def test_a_lean_view_reads_what_the_next_execution_needs_then_the_rest(
    store: CompleteStore,
) -> None:
    """A lean view reads the latest execution's records and those after the snapshot; the
    rest stand as placeholders, which refuse use, until a full refresh reads them in."""
    cid = await varied_log(store)
    live = await Journal.open(store, cid, model=planning_model(), tools=RecordingTools())
    await live.exec(EchoHarness(), [user("one past the snapshot")])
    snapshot = await store.get_snapshot(cid)
    assert snapshot is not None
    head = await store.head(cid)
    lean, read = await taken_in_lean(store, cid)
    latest_start = max(e.start_index for e in lean.executions.by_id.values())
    assert lean.head == head and read <= head - latest_start + 1 < head
    full = await taken_in(store, cid, snapshot=False)
    assert lean.messages() == full.messages() and lean.message_seqs() == full.message_seqs()
    assert lean.latest is not None and full.latest is not None
    assert [r.hash for r in lean.latest.effects] == [r.hash for r in full.latest.effects]
    with pytest.raises(LookupError, match="has not been read"):
        _ = lean.records[1].payload
    await lean.refresh(store, cid)  # a full refresh reads the placeholders in
    assert view_state(lean) == view_state(full)


async def test_an_execution_from_a_lean_view_goes_on_as_from_a_full_one(
    store: CompleteStore,
) -> None:
    """The next execution, and the next snapshot, from a cold journal's lean view."""
    cid = await varied_log(store)
    cold = await Journal.open(store, cid, model=planning_model(), tools=RecordingTools())
    await cold.exec(LoopHarness(), [user("lookup and charge")])
    assert cold.view._unread > 0  # it ran from the lean view
    await cold.exec(CompactingHarness(), [user("compact from it")])
    await cold.exec(EchoHarness(), [user("and go on")])
    assert await store.verify(cid) == await store.head(cid)
    snapshot = await store.get_snapshot(cid)
    assert snapshot is not None and snapshot[0] == await store.head(cid)  # saved from it
    full = await taken_in(store, cid, snapshot=False)
    assert view_state(await taken_in(store, cid, snapshot=True)) == view_state(full)
    assert view_state(await cold.refresh()) == view_state(full)


async def test_a_lean_view_of_a_log_its_snapshot_misdescribes_starts_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The placeholders' rows can only be checked once they are read: a snapshot whose last
    hash fits but whose older rows do not is found out then, and the view starts over."""
    store = MemoryStore()
    cid = await varied_log(store)
    snapshot = await store.get_snapshot(cid)
    assert snapshot is not None
    seq, body = snapshot
    cut = body.rindex(b"\n")
    state = orjson.loads(body[cut + 1 :])
    first = state["executions"][0]
    first[2] += 1  # the oldest execution's start moved off its start record
    spoiled = body[: cut + 1] + orjson.dumps(state)
    store._logs[cid].snapshot = (seq, spoiled)
    lean, _ = await taken_in_lean(store, cid)
    assert lean._unread > first[2]
    with caplog.at_level(logging.INFO, logger="tether.journal"):
        await lean.refresh(store, cid)
    assert "does not fit its log" in caplog.text
    assert view_state(lean) == view_state(await taken_in(store, cid, snapshot=False))


async def test_a_snapshot_that_cannot_be_kept_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Unwritable(MemoryStore):
        attempts = 0

        async def put_snapshot(self, conversation_id: str, *, seq: int, body: bytes) -> None:
            self.attempts += 1
            raise StoreUnavailable("disk full")

    store = Unwritable()
    with caplog.at_level(logging.WARNING, logger="tether.journal"):
        cid = await varied_log(store)  # every execution still succeeds
    assert "could not keep a snapshot" in caplog.text
    assert await store.get_snapshot(cid) is None
    view = await taken_in(store, cid, snapshot=False)
    attempts = store.attempts
    for _ in range(2):  # once, then not again until the log grows
        await view.save_snapshot(store, cid)
    assert store.attempts == attempts + 1


async def test_a_log_that_cannot_be_transcribed_still_ends_its_execution(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*parts: object) -> bytes:
        raise RecordDecodeError("a malformed record")

    monkeypatch.setattr("tether.journal._view.encode_snapshot", broken)
    store = MemoryStore()
    with caplog.at_level(logging.WARNING, logger="tether.journal"):
        cid = await varied_log(store)
    assert "could not keep a snapshot" in caplog.text
    assert (await taken_in(store, cid, snapshot=False)).latest.completed  # type: ignore[union-attr]


async def test_only_a_log_long_enough_to_be_snapshotted_is_asked_for_one(
    store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots exist past MIN_RECORDS only: a new view of a shorter log, most views, costs
    no snapshot lookup; a longer one's first page is the start of its snapshot's prefix."""
    monkeypatch.setattr("tether.journal._snapshot.MIN_RECORDS", 6)
    asked: list[str] = []
    real = store.get_snapshot

    async def counted(conversation_id: str) -> tuple[int, bytes] | None:
        asked.append(conversation_id)
        return await real(conversation_id)

    monkeypatch.setattr(store, "get_snapshot", counted)
    cid = await new_conversation(store)
    journal = await Journal.open(store, cid, model=planning_model())
    await journal.exec(EchoHarness(), [user("hi")])
    assert asked == [] and await store.head(cid) == 6  # the journal's own view: never asked
    await LogView().refresh(store, cid)  # now long enough
    assert asked == [cid] and await store.get_snapshot(cid) is not None
    asked.clear()
    second = await new_conversation(store, "short")
    await LogView().refresh(store, second)
    assert asked == []
    restored, recorded = LogView(), await taken_in(store, cid, snapshot=False)
    await restored.refresh(store, cid)
    assert view_state(restored) == view_state(recorded)


def test_sigkill_while_snapshots_are_kept_leaves_a_log_a_cold_reader_restores(
    tmp_path: Path,
) -> None:
    """A process ending executions and keeping a snapshot after each is killed at random
    moments, three times over. Whatever the kill left (a snapshot behind the log, one just
    written, one cut off mid-write), a cold reader's view equals the one taken in record by
    record (also when it starts lean and reads the rest after), and the next process goes on
    from it."""
    worker = Path(__file__).with_name("snapshot_worker.py")

    async def setup() -> str:
        async with await SqliteStore.open(tmp_path) as store:
            return await new_conversation(store)

    cid = asyncio.run(setup())
    command = [sys.executable, str(worker), str(tmp_path), cid]
    for acknowledged in killed_repeatedly(command, seed=11, acknowledgements=(10, 60)):

        async def check(acknowledged: int) -> None:
            async with await SqliteStore.open(tmp_path) as store:
                assert await store.verify(cid) == await store.head(cid) >= acknowledged
                snapshot = await store.get_snapshot(cid)
                assert snapshot is not None and snapshot[0] <= await store.head(cid)
                restored = await taken_in(store, cid, snapshot=True)
                assert restored._snapshots.seq == snapshot[0]
                full = view_state(await taken_in(store, cid, snapshot=False))
                assert view_state(restored) == full
                lean, _ = await taken_in_lean(store, cid)  # as the next execution would start
                await lean.refresh(store, cid)
                assert view_state(lean) == full

        asyncio.run(check(acknowledged))
