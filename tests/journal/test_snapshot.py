"""A view's snapshot: a long log taken in without decoding it must be the same view."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson
import pytest
from pydantic import JsonValue

from tether.errors import RecordDecodeError, StoreUnavailable
from tether.journal import Journal, JournalHooks, LogView, Turn
from tether.journal._snapshot import snapshot_due
from tether.messages import Message, ModelRequest
from tether.records import Record, Signal, SteerReceived
from tether.store import MemoryStore, SessionKey, SqliteStore, Store
from tether.testing import RecordingTools, copy_prefix

from ..kill import killed_repeatedly
from .harnesses import EchoHarness, LoopHarness, new_conversation, planning_model, user
from .test_view import CompactingHarness


@pytest.fixture(autouse=True)
def short_logs_get_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot from a few records on, so small logs exercise every path."""
    monkeypatch.setattr("tether.journal._snapshot.MIN_RECORDS", 4)


def _state(view: LogView) -> object:
    """Everything a view derives from its records, in comparable form."""
    executions = [
        (
            e.id,
            e.start_index,
            [r.seq for r in e.inputs],
            [r.seq for r in e.effects],
            None if e.end is None else e.end.seq,
        )
        for e in view.executions.by_id.values()
    ]
    by_submission = {k: [e.id for e in v] for k, v in view.executions.by_submission.items()}
    latest = view.latest
    return (
        [r.hash for r in view.records],
        executions,
        by_submission,
        view.messages(),
        view.message_seqs(),
        view.fork_seq,
        view.steer_sources,
        view.conversation,
        None if latest is None else view.history_before(latest),
    )


async def _taken_in(store: Store, conversation_id: str, *, snapshot: bool) -> LogView:
    view = LogView()
    if not snapshot:
        real = store.get_snapshot

        async def none(conversation_id: str) -> None:
            return None

        store.get_snapshot = none  # type: ignore[method-assign]
        try:
            await view.refresh(store, conversation_id)
        finally:
            store.get_snapshot = real  # type: ignore[method-assign]
        return view
    await view.refresh(store, conversation_id)
    return view


async def _varied_log(store: Store) -> str:
    """Executions with tools, a steer, a signal, a compaction; then a fork of it."""
    cid = await new_conversation(store)
    steers = [SteerReceived(body="also lookup", mode="steer", source_submission_id="sub-9")]

    async def source(modes: tuple[str, ...]) -> Sequence[SteerReceived]:
        delivered, steers[:] = list(steers), []
        return delivered

    live = await Journal.open(
        store,
        cid,
        model=planning_model(),
        tools=RecordingTools(),
        hooks=JournalHooks(steer_source=source),
    )
    await live.exec(LoopHarness(), [user("hello")])
    await live.exec(LoopHarness(), [user("lookup and charge")])
    await live.exec(EchoHarness(), [Signal(type="ping", body="{}")])
    await live.exec(CompactingHarness(), [user("and once more")])
    await live.exec(EchoHarness(), [user("after the compaction")])
    return cid


async def test_a_view_from_a_snapshot_equals_one_taken_in_record_by_record(
    store: Store,
) -> None:
    cid = await _varied_log(store)
    snapshot = await store.get_snapshot(cid)
    assert snapshot is not None and snapshot[0] > 4
    restored = await _taken_in(store, cid, snapshot=True)
    assert restored._snapshot_seq == snapshot[0]  # it did start from the snapshot
    assert _state(restored) == _state(await _taken_in(store, cid, snapshot=False))


async def test_a_fork_and_a_pending_execution_restore_too(store: Store) -> None:
    cid = await _varied_log(store)
    parent = await Journal.open(store, cid, model=planning_model(), tools=RecordingTools())
    child = await parent.fork(await store.head(cid), SessionKey("agent", "inst", "what-if"))
    inherited = await _taken_in(store, child.id, snapshot=True)  # the parent's snapshot
    assert inherited._snapshot_seq > 0 and inherited.fork_seq == inherited.head
    assert _state(inherited) == _state(await _taken_in(store, child.id, snapshot=False))
    forked = await Journal.open(store, child.id, model=planning_model())
    await forked.exec(EchoHarness(), [user("in the fork")])
    restored = await _taken_in(store, child.id, snapshot=True)
    assert restored._snapshot_seq > 0 and restored.fork_seq > 0
    assert _state(restored) == _state(await _taken_in(store, child.id, snapshot=False))

    # The parent cut before its last end: a pending execution, snapshotted as it stands.
    cut = MemoryStore()
    await copy_prefix(store, cid, (await store.head(cid)) - 1, cut)
    await (await _taken_in(cut, cid, snapshot=False)).save_snapshot(cut, cid)
    pending = await _taken_in(cut, cid, snapshot=True)
    assert pending._snapshot_seq > 0
    assert pending.latest is not None and not pending.latest.completed
    assert _state(pending) == _state(await _taken_in(cut, cid, snapshot=False))
    resumed = await Journal.open(cut, cid, model=planning_model(), view=pending)
    output = (await resumed.resume(EchoHarness())).output
    finished = (await _taken_in(store, cid, snapshot=False)).latest
    assert finished is not None and output == finished.output  # as the original run ended


async def test_a_restored_view_goes_on_live(store: Store) -> None:
    """Appends, transcription, compaction and the next snapshot all carry on from it."""
    cid = await _varied_log(store)
    restored = await _taken_in(store, cid, snapshot=True)
    first = restored._snapshot_seq
    live = await Journal.open(store, cid, model=planning_model(), view=restored)
    await live.exec(CompactingHarness(), [user("compact again")])
    await live.exec(EchoHarness(), [user("and go on")])
    assert _state(restored) == _state(await _taken_in(store, cid, snapshot=False))
    latest = await store.get_snapshot(cid)
    assert latest is not None and latest[0] > first  # due again: saved at an end
    assert _state(await _taken_in(store, cid, snapshot=True)) == _state(restored)


async def _lean(store: Store, conversation_id: str) -> tuple[LogView, int]:
    """A new view taken in lean, and how many records it read."""
    read = 0
    real = store.read

    async def counted(
        conversation_id: str, *, after_seq: int = 0, limit: int = 1000
    ) -> list[Record]:
        nonlocal read
        page = await real(conversation_id, after_seq=after_seq, limit=limit)
        read += len(page)
        return page

    store.read = counted  # type: ignore[method-assign]
    try:
        view = LogView()
        head = await store.head(conversation_id)
        await view.refresh(store, conversation_id, lean=True, known_head=head)
    finally:
        store.read = real  # type: ignore[method-assign]
    return view, read


async def test_a_lean_view_reads_what_the_next_execution_needs_then_the_rest(
    store: Store,
) -> None:
    """A lean view reads the latest execution's records and those after the snapshot; the
    rest stand as placeholders, which refuse use, until a full refresh reads them in."""
    cid = await _varied_log(store)
    live = await Journal.open(store, cid, model=planning_model(), tools=RecordingTools())
    await live.exec(EchoHarness(), [user("one past the snapshot")])
    snapshot = await store.get_snapshot(cid)
    assert snapshot is not None
    head = await store.head(cid)
    lean, read = await _lean(store, cid)
    latest_start = max(e.start_index for e in lean.executions.by_id.values())
    assert lean.head == head and read <= head - latest_start + 1 < head
    full = await _taken_in(store, cid, snapshot=False)
    assert lean.messages() == full.messages() and lean.message_seqs() == full.message_seqs()
    assert lean.latest is not None and full.latest is not None
    assert [r.hash for r in lean.latest.effects] == [r.hash for r in full.latest.effects]
    with pytest.raises(LookupError, match="has not been read"):
        _ = lean.records[1].payload
    await lean.refresh(store, cid)  # a full refresh reads the placeholders in
    assert _state(lean) == _state(full)


async def test_an_execution_from_a_lean_view_goes_on_as_from_a_full_one(store: Store) -> None:
    """The next execution, and the next snapshot, from a cold journal's lean view."""
    cid = await _varied_log(store)
    cold = await Journal.open(store, cid, model=planning_model(), tools=RecordingTools())
    await cold.exec(LoopHarness(), [user("lookup and charge")])
    assert cold.view._unread > 0  # it ran from the lean view
    await cold.exec(CompactingHarness(), [user("compact from it")])
    await cold.exec(EchoHarness(), [user("and go on")])
    assert await store.verify(cid) == await store.head(cid)
    snapshot = await store.get_snapshot(cid)
    assert snapshot is not None and snapshot[0] == await store.head(cid)  # saved from it
    full = await _taken_in(store, cid, snapshot=False)
    assert _state(await _taken_in(store, cid, snapshot=True)) == _state(full)
    assert _state(await cold.refresh()) == _state(full)


async def test_a_lean_view_of_a_log_its_snapshot_misdescribes_starts_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The placeholders' rows can only be checked once they are read: a snapshot whose last
    hash fits but whose older rows do not is found out then, and the view starts over."""
    store = MemoryStore()
    cid = await _varied_log(store)
    snapshot = await store.get_snapshot(cid)
    assert snapshot is not None
    seq, body = snapshot
    cut = body.rindex(b"\n")
    state = orjson.loads(body[cut + 1 :])
    first = state["executions"][0]
    first[2] += 1  # the oldest execution's start moved off its start record
    spoiled = body[: cut + 1] + orjson.dumps(state)
    store._logs[cid].snapshot = (seq, spoiled)
    lean, _ = await _lean(store, cid)
    assert lean._unread > first[2]
    with caplog.at_level(logging.INFO, logger="tether.journal"):
        await lean.refresh(store, cid)
    assert "does not fit its log" in caplog.text
    assert _state(lean) == _state(await _taken_in(store, cid, snapshot=False))


def _messages_cut(body: bytes) -> int:
    return body.rindex(b"\n")


@pytest.mark.parametrize(
    ("spoil", "adopted"),
    [
        (lambda body: body[: len(body) // 2], False),
        (lambda body: body.replace(b'"format":1', b'"format":99', 1), False),
        (lambda body: body.replace(b'"groups":[[', b'"groups":[[1,', 1), False),
        (lambda body: body + b"}", False),
        # The indexes fit, the messages do not: found out when the transcript is restored.
        (lambda body: b"not json" + body, True),
        (lambda body: b"[]" + body[_messages_cut(body) :], True),
    ],
    ids=["truncated", "format", "groups", "state", "messages", "no-messages"],
)
async def test_a_snapshot_that_does_not_fit_is_ignored(
    spoil: Callable[[bytes], bytes], adopted: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    cid = await _varied_log(store)
    seq, body = await store.get_snapshot(cid) or (0, b"")
    store._logs[cid].snapshot = (seq, spoil(body))
    with caplog.at_level(logging.INFO, logger="tether.journal"):
        view = await _taken_in(store, cid, snapshot=True)
        expected = await _taken_in(store, cid, snapshot=False)
        assert _state(view) == _state(expected)
    assert (view._snapshot_seq == seq) is adopted and "does not fit" in caplog.text


async def test_a_snapshot_of_another_log_is_ignored() -> None:
    """Bound by the hash of its last record: a log that differs there is not its log."""
    store = MemoryStore()
    cid = await _varied_log(store)
    seq, body = await store.get_snapshot(cid) or (0, b"")
    other = MemoryStore()
    other_cid = await _varied_log(other)  # the same shape, other ids and times
    other._logs[other_cid].snapshot = (seq, body)
    view = await _taken_in(other, other_cid, snapshot=True)
    assert view._snapshot_seq == 0
    assert _state(view) == _state(await _taken_in(other, other_cid, snapshot=False))


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
        cid = await _varied_log(store)  # every execution still succeeds
    assert "could not keep a snapshot" in caplog.text
    assert await store.get_snapshot(cid) is None
    view = await _taken_in(store, cid, snapshot=False)
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
        cid = await _varied_log(store)
    assert "could not keep a snapshot" in caplog.text
    assert (await _taken_in(store, cid, snapshot=False)).latest.completed  # type: ignore[union-attr]


def test_snapshots_come_once_a_log_is_long_and_then_as_it_grows_by_a_quarter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tether.journal._snapshot.MIN_RECORDS", 4096)
    assert not snapshot_due(4095, 0)
    assert snapshot_due(4096, 0)
    assert not snapshot_due(5000, 4096) and snapshot_due(5120, 4096)
    assert not snapshot_due(40_000, 33_000) and snapshot_due(40_000, 32_000)


async def test_only_a_log_long_enough_to_be_snapshotted_is_asked_for_one(
    store: Store, monkeypatch: pytest.MonkeyPatch
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
    restored, recorded = LogView(), await _taken_in(store, cid, snapshot=False)
    await restored.refresh(store, cid)
    assert _state(restored) == _state(recorded)


class _EchoRecorder(EchoHarness):
    """Echo, keeping each turn's history and answer."""

    def __init__(self) -> None:
        self.histories: list[list[Message]] = []
        self.answers: list[Message] = []

    async def run(self, turn: Turn) -> JsonValue:
        history = list(turn.history)
        request = ModelRequest(model="test", messages=(*history, *turn.inputs))
        answer = (await turn.model(request)).message
        self.histories.append(history)
        self.answers.append(answer)
        return answer.text


async def test_a_replay_from_a_snapshot_leaves_its_transcript_undecoded(store: Store) -> None:
    """A replay transcribes the records it serves, so the history it hands a turn holds the
    very completions it served before (what lets the input hash resume on identity)."""
    cid = await new_conversation(store)
    live = await Journal.open(store, cid, model=planning_model())
    for n in range(4):
        await live.exec(EchoHarness(), [user(f"question {n}")])
    replaying = await Journal.open(store, cid, fence=0)
    recorder = _EchoRecorder()
    assert len(await replaying.replay(recorder)) == 4
    assert replaying.view._snapshot_seq > 0 and replaying.view._unrestored is not None
    for earlier, history in zip(recorder.answers, recorder.histories[1:], strict=False):
        assert any(message is earlier for message in history)


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
                restored = await _taken_in(store, cid, snapshot=True)
                assert restored._snapshot_seq == snapshot[0]
                full = _state(await _taken_in(store, cid, snapshot=False))
                assert _state(restored) == full
                lean, _ = await _lean(store, cid)  # as the next execution would start
                await lean.refresh(store, cid)
                assert _state(lean) == full

        asyncio.run(check(acknowledged))
