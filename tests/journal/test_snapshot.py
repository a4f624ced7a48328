"""A view's snapshot (the body and when one is due): a long log taken in without decoding it
must be the same view."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from pydantic import JsonValue

from tether.journal import Journal, Turn
from tether.journal._snapshot import snapshot_due
from tether.messages import Message, ModelRequest
from tether.store import MemoryStore, SessionKey, Store
from tether.testing import RecordingTools, copy_prefix
from tether.testing.storetest import CompleteStore

from .harnesses import EchoHarness, new_conversation, planning_model, user
from .snapshots import taken_in, varied_log, view_state
from .test_view import CompactingHarness


@pytest.fixture(autouse=True)
def short_logs_get_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Snapshot from a few records on, so small logs exercise every path."""
    monkeypatch.setattr("tether.journal._snapshot.MIN_RECORDS", 4)


async def test_a_view_from_a_snapshot_equals_one_taken_in_record_by_record(
    store: CompleteStore,
) -> None:
    cid = await varied_log(store)
    snapshot = await store.get_snapshot(cid)
    assert snapshot is not None and snapshot[0] > 4
    restored = await taken_in(store, cid, snapshot=True)
    assert restored._snapshots.seq == snapshot[0]  # it did start from the snapshot
    assert view_state(restored) == view_state(await taken_in(store, cid, snapshot=False))


async def test_a_fork_and_a_pending_execution_restore_too(store: CompleteStore) -> None:
    cid = await varied_log(store)
    parent = await Journal.open(store, cid, model=planning_model(), tools=RecordingTools())
    child = await parent.fork(await store.head(cid), SessionKey("agent", "inst", "what-if"))
    inherited = await taken_in(store, child.id, snapshot=True)  # the parent's snapshot
    assert inherited._snapshots.seq > 0 and inherited.fork_seq == inherited.head
    assert view_state(inherited) == view_state(await taken_in(store, child.id, snapshot=False))
    forked = await Journal.open(store, child.id, model=planning_model())
    await forked.exec(EchoHarness(), [user("in the fork")])
    restored = await taken_in(store, child.id, snapshot=True)
    assert restored._snapshots.seq > 0 and restored.fork_seq > 0
    assert view_state(restored) == view_state(await taken_in(store, child.id, snapshot=False))

    # The parent cut before its last end: a pending execution, snapshotted as it stands.
    cut = MemoryStore()
    await copy_prefix(store, cid, (await store.head(cid)) - 1, cut)
    await (await taken_in(cut, cid, snapshot=False)).save_snapshot(cut, cid)
    pending = await taken_in(cut, cid, snapshot=True)
    assert pending._snapshots.seq > 0
    assert pending.latest is not None and not pending.latest.completed
    assert view_state(pending) == view_state(await taken_in(cut, cid, snapshot=False))
    resumed = await Journal.open(cut, cid, model=planning_model(), view=pending)
    output = (await resumed.resume(EchoHarness())).output
    finished = (await taken_in(store, cid, snapshot=False)).latest
    assert finished is not None and output == finished.output  # as the original run ended


async def test_a_restored_view_goes_on_live(store: CompleteStore) -> None:
    """Appends, transcription, compaction and the next snapshot all carry on from it."""
    cid = await varied_log(store)
    restored = await taken_in(store, cid, snapshot=True)
    first = restored._snapshots.seq
    live = await Journal.open(store, cid, model=planning_model(), view=restored)
    await live.exec(CompactingHarness(), [user("compact again")])
    await live.exec(EchoHarness(), [user("and go on")])
    assert view_state(restored) == view_state(await taken_in(store, cid, snapshot=False))
    latest = await store.get_snapshot(cid)
    assert latest is not None and latest[0] > first  # due again: saved at an end
    assert view_state(await taken_in(store, cid, snapshot=True)) == view_state(restored)


def _messages_cut(body: bytes) -> int:
    return body.rindex(b"\n")


@pytest.mark.parametrize(
    ("spoil", "adopted"),
    [
        (lambda body: body[: len(body) // 2], False),
        (lambda body: body.replace(b'"format":2', b'"format":99', 1), False),
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
    cid = await varied_log(store)
    seq, body = await store.get_snapshot(cid) or (0, b"")
    store._logs[cid].snapshot = (seq, spoil(body))
    with caplog.at_level(logging.INFO, logger="tether.journal"):
        view = await taken_in(store, cid, snapshot=True)
        expected = await taken_in(store, cid, snapshot=False)
        assert view_state(view) == view_state(expected)
    assert (view._snapshots.seq == seq) is adopted and "does not fit" in caplog.text


async def test_a_snapshot_of_another_log_is_ignored() -> None:
    """Bound by the hash of its last record: a log that differs there is not its log."""
    store = MemoryStore()
    cid = await varied_log(store)
    seq, body = await store.get_snapshot(cid) or (0, b"")
    other = MemoryStore()
    other_cid = await varied_log(other)  # the same shape, other ids and times
    other._logs[other_cid].snapshot = (seq, body)
    view = await taken_in(other, other_cid, snapshot=True)
    assert view._snapshots.seq == 0
    assert view_state(view) == view_state(await taken_in(other, other_cid, snapshot=False))


def test_snapshots_come_once_a_log_is_long_and_then_as_it_grows_by_a_quarter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tether.journal._snapshot.MIN_RECORDS", 4096)
    assert not snapshot_due(4095, 0)
    assert snapshot_due(4096, 0)
    assert not snapshot_due(5000, 4096) and snapshot_due(5120, 4096)
    assert not snapshot_due(40_000, 33_000) and snapshot_due(40_000, 32_000)


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
    assert replaying.view._snapshots.seq > 0 and replaying.view._unrestored is not None
    for earlier, history in zip(recorder.answers, recorder.histories[1:], strict=False):
        assert any(message is earlier for message in history)
