"""Conformance cases for the core's log (``LogStore``, and ``Store.ping`` and ``close``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
import pytest

from tether.errors import Conflict, ConversationNotFound, Fenced, LogTampered, StoreUnavailable
from tether.records import ConversationCreated, RecordDraft, UserMessage, decode_record, format_time
from tether.testing.storetest._base import (
    T0,
    BaseConformance,
    CompleteStore,
    Fixtures,
    case,
    offers,
)

__all__ = ("LogCases",)


class LogCases(BaseConformance):
    @case
    async def test_conversation_ensure_and_get(self, store: CompleteStore, fx: Fixtures) -> None:
        with pytest.raises(ConversationNotFound):
            await store.find_conversation(fx.key())
        with pytest.raises(ConversationNotFound):
            await store.get_conversation("conv-absent")
        first, created = await store.ensure_conversation(
            fx.key(), conversation_id="conv-1", created_at=T0
        )
        again, created_again = await store.ensure_conversation(
            fx.key(), conversation_id="conv-2", created_at=fx.at(9)
        )
        assert created and not created_again
        assert first == again and first.id == "conv-1" and first.created_at == T0
        assert await store.get_conversation("conv-1") == first
        assert await store.find_conversation(fx.key()) == first
        [record] = await store.read("conv-1")
        assert record.seq == 1 and record.prev_hash == "" and record.id == "conv-1"
        assert record.payload == ConversationCreated(
            agent="support", instance="acme", session="default"
        )

    @case
    async def test_concurrent_ensure_creates_one_conversation(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        results = await asyncio.gather(
            *(
                store.ensure_conversation(fx.key(), conversation_id=f"conv-{n}", created_at=T0)
                for n in range(8)
            )
        )
        assert len({conversation.id for conversation, _ in results}) == 1
        assert sum(created for _, created in results) == 1
        assert await store.head(results[0][0].id) == 1

    @case
    async def test_record_append_and_read_from_offset(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid = await fx.conversation()
        first = await store.append(cid, [fx.draft("a"), fx.draft("b")], expected_seq=1, fence=0)
        second = await store.append(cid, [fx.draft(t) for t in "cde"], expected_seq=3, fence=0)
        assert [r.seq for r in first + second] == [2, 3, 4, 5, 6]
        records = await store.read(cid)
        assert records[1:] == first + second
        assert [r.payload for r in records[1:]] == [UserMessage(body=t) for t in "abcde"]
        assert await store.read(cid, after_seq=3) == second
        assert await store.head(cid) == 6
        for record in records[1:]:
            assert record.prev_hash == records[record.seq - 2].hash
            assert record.conversation_id == cid and record.session == "default"

    @case
    async def test_records_round_trip_through_the_wire_form(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid = await fx.conversation()
        draft = fx.draft(
            "héllo ✓ 𝄞", submission_id="sub-1", attempt_id="att-1", execution_id="ex-1", turn=2
        )
        [record] = await store.append(cid, [draft], expected_seq=1, fence=0)
        [read] = await store.read(cid, after_seq=1)
        decoded = decode_record(read.to_json())
        assert decoded == record == read
        assert (read.submission_id, read.attempt_id, read.execution_id, read.turn) == (
            "sub-1",
            "att-1",
            "ex-1",
            2,
        )
        assert read.id == draft.id and read.time == draft.time
        assert orjson.loads(read.to_json())["hash"] == record.hash

    @case
    async def test_paging(self, store: CompleteStore, fx: Fixtures) -> None:
        cid = await fx.conversation()
        await fx.fill(cid, 24)
        seen: list[int] = []
        after = 0
        while page := await store.read(cid, after_seq=after, limit=7):
            assert len(page) <= 7
            seen.extend(r.seq for r in page)
            after = page[-1].seq
        assert seen == list(range(1, 26))
        assert await store.read(cid, after_seq=25) == []
        assert await store.read(cid, after_seq=100) == []
        with pytest.raises(ValueError):
            await store.read(cid, limit=0)

    @case
    async def test_unknown_conversation_ids_raise_not_found(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        absent = "conv-absent"
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: store.read(absent),
            lambda: store.head(absent),
            lambda: store.append(absent, [fx.draft()], expected_seq=0, fence=0),
            lambda: store.mint_fence(absent),
            lambda: store.verify(absent),
        ]
        if offers(store, "forks"):
            calls.append(
                lambda: store.fork(
                    absent, at_seq=1, key=fx.key("f"), new_conversation_id="c", created_at=T0
                )
            )
        for call in calls:
            with pytest.raises(ConversationNotFound):
                await call()

    @case
    async def test_cas(self, store: CompleteStore, fx: Fixtures) -> None:
        cid = await fx.conversation()
        await store.append(cid, [fx.draft()], expected_seq=1, fence=0)
        with pytest.raises(Conflict) as caught:
            await store.append(cid, [fx.draft()], expected_seq=1, fence=0)
        assert (caught.value.expected_seq, caught.value.actual_seq) == (1, 2)
        with pytest.raises(Conflict):
            await store.append(cid, [fx.draft()], expected_seq=5, fence=0)
        assert [r.seq for r in await store.append(cid, [fx.draft()], expected_seq=2, fence=0)] == [
            3
        ]

    @case
    async def test_fencing(self, store: CompleteStore, fx: Fixtures) -> None:
        cid = await fx.conversation()
        f1 = await store.mint_fence(cid)
        await store.append(cid, [fx.draft()], expected_seq=1, fence=f1)
        f2 = await store.mint_fence(cid)
        assert f2 > f1
        with pytest.raises(Fenced):
            await store.append(cid, [fx.draft()], expected_seq=2, fence=f1)
        await store.append(cid, [fx.draft()], expected_seq=2, fence=f2)
        await store.append(cid, [fx.draft()], expected_seq=3, fence=f2 + 5)  # higher is accepted
        assert await store.head(cid) == 4

    @case
    async def test_cas_is_checked_before_the_fence(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        cid = await fx.conversation()
        f1 = await store.mint_fence(cid)
        await store.append(cid, [fx.draft()], expected_seq=1, fence=f1)
        await store.mint_fence(cid)
        with pytest.raises(Conflict):
            await store.append(cid, [fx.draft()], expected_seq=1, fence=f1)

    @case
    async def test_fences_are_per_conversation(self, store: CompleteStore, fx: Fixtures) -> None:
        a, b = await fx.conversation("a"), await fx.conversation("b")
        assert [await store.mint_fence(a) for _ in range(3)] == [1, 2, 3]
        assert await store.mint_fence(b) == 1
        await store.append(b, [fx.draft()], expected_seq=1, fence=1)

    @case
    async def test_batches_are_atomic(self, store: CompleteStore, fx: Fixtures) -> None:
        cid = await fx.conversation()
        fence = await store.mint_fence(cid)
        before = await store.read(cid)
        for expected, used in ((0, fence), (1, fence - 1)):
            with pytest.raises((Conflict, Fenced)):
                await store.append(
                    cid, [fx.draft(str(n)) for n in range(5)], expected_seq=expected, fence=used
                )
            assert await store.read(cid) == before and await store.head(cid) == 1
        batch = await store.append(
            cid, [fx.draft(str(n)) for n in range(5)], expected_seq=1, fence=fence
        )
        assert [r.seq for r in batch] == [2, 3, 4, 5, 6]
        with pytest.raises(ValueError):
            await store.append(cid, [], expected_seq=6, fence=fence)

    @case
    async def test_concurrent_appends_have_one_winner_per_conversation(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        conversations = [await fx.conversation(f"s{n}") for n in range(4)]
        attempts = [(cid, n) for cid in conversations for n in range(8)]
        outcomes = await asyncio.gather(
            *(
                store.append(cid, [fx.draft(str(n))], expected_seq=1, fence=0)
                for cid, n in attempts
            ),
            return_exceptions=True,
        )
        for cid in conversations:
            mine = [o for (c, _), o in zip(attempts, outcomes, strict=True) if c == cid]
            assert sum(not isinstance(o, BaseException) for o in mine) == 1
            assert all(isinstance(o, Conflict) for o in mine if isinstance(o, BaseException))
            assert await store.head(cid) == 2
            assert await store.verify(cid) == 2

    @case
    async def test_verify_detects_tampering(self, store: CompleteStore, fx: Fixtures) -> None:
        cid = await fx.conversation()
        await fx.fill(cid, 4)
        assert await store.verify(cid) == 5
        [third] = await store.read(cid, after_seq=2, limit=1)
        forged = third.canonical.replace(b'"body":"hi"', b'"body":"HI"')
        assert forged != third.canonical
        try:
            await self.tamper(store, cid, 3, forged)
        except NotImplementedError:
            pytest.skip("the backend supplies no tamper hook")
        with pytest.raises(LogTampered) as caught:
            await store.verify(cid)
        assert caught.value.seq == 3

    @case
    async def test_verify_detects_a_log_cut_short(self, store: CompleteStore, fx: Fixtures) -> None:
        """Each remaining record still links to the one before it: only the anchor the
        conversation keeps (its head seq and hash, moved by every append) tells the loss."""
        cid = await fx.conversation()
        await fx.fill(cid, 4)
        forks = offers(store, "forks")  # a fork's log is cut short the same way
        child = "conv-fork"
        if forks:
            await store.fork(
                cid, at_seq=3, key=fx.key("fork"), new_conversation_id=child, created_at=T0
            )
            assert await store.verify(child) == 4
        assert await store.verify(cid) == 5
        try:
            await self.truncate(store, cid, 4)
            if forks:
                await self.truncate(store, child, 3)
        except NotImplementedError:
            pytest.skip("the backend supplies no truncate hook")
        with pytest.raises(LogTampered, match="log ends at 4, head is 5") as caught:
            await store.verify(cid)
        assert caught.value.seq == 5
        if forks:
            with pytest.raises(LogTampered, match="log ends at 3, head is 4"):
                await store.verify(child)

    @case
    async def test_a_record_time_never_goes_back(self, store: CompleteStore, fx: Fixtures) -> None:
        """Drafts are stamped before they reach the store (two writers, or a clock stepped
        back): a later seq takes its predecessor's time rather than an earlier one."""
        cid = await fx.conversation()  # created at T0

        def at(seconds: float) -> RecordDraft:
            return RecordDraft(UserMessage(body="t"), time=format_time(fx.at(seconds)))

        await store.append(cid, [at(10)], expected_seq=1, fence=0)
        await store.append(cid, [at(5), at(20), at(15)], expected_seq=2, fence=0)
        await store.append(cid, [at(1)], expected_seq=5, fence=0)
        await store.append(cid, [at(30)], expected_seq=6, fence=0)
        times = [record.time for record in await store.read(cid)]
        expected = [0, 10, 10, 20, 20, 20, 30]
        assert times == [format_time(fx.at(seconds)) for seconds in expected]
        assert await store.verify(cid) == 7
        if not offers(store, "forks"):
            return
        child = await store.fork(
            cid, at_seq=4, key=fx.key("fork"), new_conversation_id="conv-f", created_at=fx.at(2)
        )
        [marker] = await store.read(child.id, after_seq=4)
        assert marker.time == format_time(fx.at(20))
        assert await store.verify(child.id) == 5

    @case
    async def test_ping_writes_or_says_why_not(self, store: CompleteStore, fx: Fixtures) -> None:
        await store.ping()
        await store.ping()
        await store.close()
        with pytest.raises(StoreUnavailable):
            await store.ping()

    @case
    async def test_wait_for_append(self, store: CompleteStore, fx: Fixtures) -> None:
        cid = await fx.conversation()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await store.wait_for_append(cid, after_seq=1)
        assert await store.wait_for_append(cid, after_seq=0) == 1
        waiter = asyncio.ensure_future(store.wait_for_append(cid, after_seq=1))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        await store.append(cid, [fx.draft()], expected_seq=1, fence=0)
        assert await asyncio.wait_for(waiter, 10) == 2

    @case
    async def test_closed_store_is_unavailable(self, store: CompleteStore, fx: Fixtures) -> None:
        cid = await fx.conversation()
        await store.close()
        await store.close()  # idempotent
        with pytest.raises(StoreUnavailable):
            await store.head(cid)
        with pytest.raises(StoreUnavailable):
            await store.append(cid, [fx.draft()], expected_seq=1, fence=0)
