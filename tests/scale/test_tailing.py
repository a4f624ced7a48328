"""Tailing many conversations on PostgreSQL while they are written: no holes, no duplicates.

Eight writers append to eight conversations, each through its own fence and CAS loop (a
conflict re-reads the head and retries, as an engine attempt would), in small batches with
short pauses so the tailers keep catching up and waiting. Two tailers follow all eight with
``wait_for_append`` + ``read(after_seq=...)`` and must see every record of every conversation
exactly once, in seq order, with the hashes the log holds.

In the ``notify`` variant both tailers use a second store (its own pool and LISTEN connection,
as another process would) that polls only once an hour: a wake-up that did not come through
LISTEN/NOTIFY would leave its tailer waiting past the scenario's bound, so finishing at all
proves they all did, however slow the machine.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tether.errors import Conflict
from tether.records import Record, RecordDraft, UserMessage
from tether.store import SessionKey
from tether.store.postgres import PostgresStore

from ..postgres import drop_schemas, fresh_schema, store_url

pytestmark = pytest.mark.postgres

WRITERS = 8
PER_WRITER = 40  # 320 records in all, plus each conversation's first record
TAILERS = 2
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


async def _writer(store: PostgresStore, conversation_id: str, seed: int) -> None:
    rng = random.Random(seed)
    fence = await store.mint_fence(conversation_id)
    written = 0
    while written < PER_WRITER:
        size = min(rng.randint(1, 3), PER_WRITER - written)
        drafts = [
            RecordDraft(UserMessage(body=f"{conversation_id} #{written + n}")) for n in range(size)
        ]
        head = await store.head(conversation_id)
        while True:
            try:
                await store.append(conversation_id, drafts, expected_seq=head, fence=fence)
                break
            except Conflict:
                head = await store.head(conversation_id)
        written += size
        await asyncio.sleep(rng.uniform(0, 0.004))  # drawn gaps between the writes


class Tailer:
    """Follows every conversation; keeps every record it was handed, and counts its waits."""

    def __init__(self, store: PostgresStore, targets: dict[str, int]) -> None:
        self.store = store
        self.targets = targets
        self.seen: dict[str, list[Record]] = {cid: [] for cid in targets}
        self.waits = 0
        self.waiting: set[str] = set()
        self.caught_up = asyncio.Event()
        """Set once it has read all there was of every conversation and waits for more."""

    async def run(self) -> None:
        await asyncio.gather(*(self._follow(cid) for cid in self.targets))

    async def _follow(self, conversation_id: str) -> None:
        cursor, target = 0, self.targets[conversation_id]
        while cursor < target:
            page = await self.store.read(conversation_id, after_seq=cursor, limit=7)
            if page:
                self.seen[conversation_id].extend(page)
                cursor = page[-1].seq
                continue
            self.waiting.add(conversation_id)
            if len(self.waiting) == len(self.targets):
                self.caught_up.set()
            await self.store.wait_for_append(conversation_id, after_seq=cursor)
            self.waits += 1


async def _scenario(*, separate: bool) -> list[Tailer]:
    schema = fresh_schema()
    writers = await PostgresStore.open(store_url(schema))
    # The second store opens on the same schema with its own pool and LISTEN connection.
    poll = "3600" if separate else "1"
    others = await PostgresStore.open(store_url(schema, poll_interval=poll))
    try:
        ids = []
        for n in range(WRITERS):
            conversation, _ = await writers.ensure_conversation(
                SessionKey("tail", "i", f"s{n}"), conversation_id=f"{schema}-c{n}", created_at=NOW
            )
            ids.append(conversation.id)
        targets = dict.fromkeys(ids, 1 + PER_WRITER)
        stores = [others, others] if separate else [writers, others]
        tailers = [Tailer(stores[n], targets) for n in range(TAILERS)]
        following = [asyncio.create_task(t.run()) for t in tailers]
        try:
            async with asyncio.timeout(60):
                await asyncio.gather(*(t.caught_up.wait() for t in tailers))  # then writes
                await asyncio.gather(*(_writer(writers, cid, n) for n, cid in enumerate(ids)))
                await asyncio.gather(*following)
        except TimeoutError:
            raise AssertionError("a tailer was never woken: a notification went missing") from None
        finally:
            for task in following:
                task.cancel()
            await asyncio.gather(*following, return_exceptions=True)
        for cid in ids:
            stored = await writers.read(cid, limit=1000)
            assert [r.seq for r in stored] == list(range(1, 2 + PER_WRITER))
            assert await writers.verify(cid) == 1 + PER_WRITER
            for tailer in tailers:
                got = tailer.seen[cid]
                seqs = [r.seq for r in got]
                holes = sorted(set(range(1, 2 + PER_WRITER)) - set(seqs))
                duplicates = len(seqs) - len(set(seqs))
                assert (holes, duplicates) == ([], 0), (cid, holes, duplicates)
                assert seqs == sorted(seqs)
                assert [r.hash for r in got] == [r.hash for r in stored]
        return tailers
    finally:
        await others.close()
        await writers.close()


async def test_tailers_see_every_record_once_in_order() -> None:
    tailers = await _scenario(separate=False)
    assert all(t.waits > 0 for t in tailers), "the tailers never had to wait: nothing was live"


async def test_tailers_on_another_store_are_woken_by_notify() -> None:
    tailers = await _scenario(separate=True)  # polls an hour apart: notifications woke them
    waits = sum(t.waits for t in tailers)
    assert waits >= WRITERS * TAILERS, waits
