"""Retention's cut of a log's head, as the journal reads it: where a cut may fall, and a view
of a truncated log derives what the full one does (issue 22, item 3)."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import pytest

from tether.journal import Journal, LogView, truncation_anchor, truncation_point
from tether.records import (
    LogTruncated,
    Record,
    RecordDraft,
    SubmissionSettled,
    UserMessage,
)
from tether.store import MemoryStore, SqliteStore, Store
from tether.testing import RecordingTools
from tether.testing.storetest import CompleteStore

from ..kill import killed_repeatedly
from .harnesses import EchoHarness, new_conversation, planning_model, user
from .snapshots import taken_in, taken_in_lean, varied_log, view_state


async def _cut(store: CompleteStore, cid: str, keep: int) -> int:
    """Truncate ``cid`` as the pruner would, keeping ``keep``; the seq it was cut through."""
    view = LogView()
    await view.refresh(store, cid)
    through = truncation_point(view.records, keep=keep, fork_seq=view.fork_seq)
    assert through > 0
    anchor = truncation_anchor(view.records, through, usage=None, model_calls=0, cost=None)
    await store.truncate_log(cid, anchor)
    return through


async def _copy(store: Store, cid: str) -> MemoryStore:
    copy = MemoryStore()
    records: list[Record] = await store.read(cid, limit=100_000)
    await copy.import_conversation(await store.get_conversation(cid), records)
    return copy


def _derived(view: LogView) -> object:
    """What a view derives, but for the records themselves and the executions before the
    cut (a truncated view holds none of them)."""
    latest = view.latest
    assert latest is not None
    return (
        view.messages(),
        view.message_seqs(),
        view.fork_seq,
        view.steer_sources,
        view.conversation,
        view.history_before(latest),
        latest.id,
        [r.hash for r in latest.effects],
    )


async def test_every_cut_a_log_allows_leaves_a_view_that_derives_the_same(
    store: CompleteStore,
) -> None:
    """Tools, a steer, a signal and a compaction: wherever the cut falls, a new view of what
    is left has the same transcript (and message seqs), steers, conversation, and latest
    execution, and the next execution sends the model what it would have."""
    cid = await varied_log(store)
    full = await taken_in(store, cid, snapshot=False)
    head = full.head
    cuts = sorted({truncation_point(full.records, keep=keep) for keep in range(1, head)} - {0})
    assert len(cuts) >= 4
    for through in cuts:
        copy = await _copy(store, cid)
        view = LogView()
        await view.refresh(copy, cid)
        anchor = truncation_anchor(view.records, through, usage=None, model_calls=0, cost=None)
        await copy.truncate_log(cid, anchor)
        truncated = await taken_in(copy, cid, snapshot=False)
        assert truncated.truncated_at == through and truncated.head == head
        assert _derived(truncated) == _derived(full), through
        assert await copy.verify(cid) == head
        # The next execution, from a cold journal on each, asks the model the same.
        asked: list[list[object]] = []
        for on in (await _copy(store, cid), copy):
            model = planning_model()
            journal = await Journal.open(on, cid, model=model, tools=RecordingTools())
            await journal.exec(EchoHarness(), [user("after the cut")])
            asked.append(list((await journal.refresh()).messages()))
        assert asked[0] == asked[1]


async def test_a_cut_splits_no_submission_and_no_unfinished_one() -> None:
    store = MemoryStore()
    cid = await new_conversation(store)

    async def said(submission: str, *, settle: bool) -> None:
        drafts = [RecordDraft(UserMessage(body=submission), submission_id=submission)]
        if settle:
            drafts.append(
                RecordDraft(SubmissionSettled(status="succeeded"), submission_id=submission)
            )
        await store.append(cid, drafts, expected_seq=await store.head(cid), fence=0)

    await said("a", settle=True)  # 2, 3
    await said("b", settle=True)  # 4, 5
    await said("c", settle=False)  # 6: still going
    await said("d", settle=True)  # 7, 8 (queued behind c in another world; here, after)
    view = LogView()
    await view.refresh(store, cid)
    assert view.head == 8
    assert truncation_point(view.records, keep=1) == 5  # not inside c, which never settled
    assert truncation_point(view.records, keep=4) == 3
    assert truncation_point(view.records, keep=6) == 0  # only seq 1 (nothing worth a cut)
    # Records a fork copied are its parent's: their state does not hold a cut back.
    assert truncation_point(view.records, keep=1, fork_seq=6) == 6
    await _cut(store, cid, keep=4)
    view = LogView()
    await view.refresh(store, cid)
    assert view.truncated_at == 3
    assert truncation_point(view.records, keep=4) == 0  # none past the anchor keeps 4
    assert truncation_point(view.records, keep=1) == 5
    with pytest.raises(ValueError, match="truncated already"):
        truncation_anchor(view.records, 2, usage=None, model_calls=0, cost=None)


async def test_a_view_behind_the_cut_starts_over_from_the_anchor(
    store: CompleteStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A view that read part of a log before its head was cut (and past it since) reads on
    from the anchor; one that had read past the cut holds the whole log and goes on."""
    cid = await varied_log(store)
    full = await taken_in(store, cid, snapshot=False)
    ahead = LogView()
    await ahead.refresh(store, cid)
    behind = LogView()  # it read the first two records, some time ago
    earlier = MemoryStore()
    first_two = await store.read(cid, limit=2)
    await earlier.import_conversation(await store.get_conversation(cid), first_two)
    await behind.refresh(earlier, cid)
    assert behind.head == 2
    through = await _cut(store, cid, keep=5)
    assert through > 2
    with caplog.at_level(logging.INFO, logger="tether.journal"):
        await behind.refresh(store, cid)
    assert "truncated past its head" in caplog.text
    assert behind.truncated_at == through
    assert _derived(behind) == _derived(full)
    await ahead.refresh(store, cid)
    assert ahead.truncated_at == 0 and view_state(ahead) == view_state(full)


async def test_gaps_and_the_anchor_refuse_what_they_do_not_carry(store: CompleteStore) -> None:
    cid = await varied_log(store)
    through = await _cut(store, cid, keep=5)
    view = await taken_in(store, cid, snapshot=False)
    assert view.records[through - 1].kind == LogTruncated.KIND
    with pytest.raises(LookupError, match="truncated away"):
        _ = view.records[0].payload
    assert view.records[0].submission_id is None and view.records[0].execution_id is None


def test_sigkill_while_logs_are_cut_leaves_every_acknowledged_turn(tmp_path: Path) -> None:
    """A process running executions and cutting its log's head every third one is killed at
    random moments, three times over. Whatever the kill left, the log verifies to its head,
    and a cold reader's transcript holds every turn once, in order: ``hello 0``, its answer,
    ``hello 1``, ... (the next process numbers its message by the turns it reads)."""
    worker = Path(__file__).with_name("truncate_worker.py")

    async def setup() -> str:
        async with await SqliteStore.open(tmp_path) as store:
            return await new_conversation(store)

    cid = asyncio.run(setup())
    command = [sys.executable, str(worker), str(tmp_path), cid]
    for acknowledged in killed_repeatedly(command, seed=7, acknowledgements=(8, 40)):

        async def check(acknowledged: int) -> None:
            async with await SqliteStore.open(tmp_path) as store:
                head = await store.head(cid)
                assert await store.verify(cid) == head >= acknowledged
                [first] = await store.read(cid, limit=1)
                assert first.kind == LogTruncated.KIND
                view = await taken_in(store, cid, snapshot=False)
                said = [m.text for m in view.messages() if m.role == "user"]
                assert said == [f"hello {n}" for n in range(len(said))]
                roles = [m.role for m in view.messages()]
                assert roles[: 2 * len(said) - 1 : 2] == ["user"] * len(said)

        asyncio.run(check(acknowledged))


async def test_a_truncated_log_with_snapshots_reads_the_same_every_way(
    store: CompleteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshots taken before the cut (the store drops those it made stale) never mislead a
    reader: started from one, lean or full, a view of what is left derives what the whole
    log did, and goes on from it."""
    monkeypatch.setattr("tether.journal._snapshot.MIN_RECORDS", 4)
    cid = await varied_log(store)
    assert await store.get_snapshot(cid) is not None
    full = _derived(await taken_in(store, cid, snapshot=False))
    await _cut(store, cid, keep=3)
    assert _derived(await taken_in(store, cid, snapshot=True)) == full
    lean, _ = await taken_in_lean(store, cid)
    await lean.refresh(store, cid)
    assert _derived(lean) == full
    cold = await Journal.open(store, cid, model=planning_model(), tools=RecordingTools())
    await cold.exec(EchoHarness(), [user("after the cut")])
    assert await store.verify(cid) == await store.head(cid)
