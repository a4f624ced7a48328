"""The Runtime's reads that the HTTP layer (and an embedding application) are given instead
of the store: ``messages``, ``verify``, ``wait_for_append`` and ``at_rest``."""

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tether.engine import Runtime
from tether.errors import ConversationNotFound, InvalidSeq, LogTampered
from tether.store import MAX_SEQ, SqliteStore, Store, SubmissionStatus

from .agents import echo_agent, loop_agent, slow_tools
from .conftest import FAST
from .test_control import wait_for_status
from .test_runtime import settle

Make = Callable[..., Runtime]


async def test_messages_are_the_history_the_model_is_given(make_runtime: Make) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        first = await runtime.dispatch("echo", "acme", "hi")
        await settle(runtime, first.submission_id)
        messages = await runtime.messages(first.conversation_id)
        assert [(m.role, m.text) for m in messages] == [("user", "hi"), ("assistant", "echo: hi")]
        second = await runtime.dispatch("echo", "acme", "again")
        await settle(runtime, second.submission_id)
        assert [m.text for m in await runtime.messages(first.conversation_id)] == [
            "hi",
            "echo: hi",
            "again",
            "echo: again",
        ]
        with pytest.raises(ConversationNotFound):
            await runtime.messages("nope")


async def test_verify_counts_the_records_of_an_intact_chain(make_runtime: Make) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hi")
        await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
        assert await runtime.verify(receipt.conversation_id) == len(records) > 1
        with pytest.raises(ConversationNotFound):
            await runtime.verify("nope")


async def test_verify_finds_a_record_altered_in_the_database(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path) as store:
        async with Runtime({"echo": echo_agent()}, store, **FAST) as runtime:
            receipt = await runtime.dispatch("echo", "acme", "original words")
            await settle(runtime, receipt.submission_id)
            assert await runtime.verify(receipt.conversation_id) > 1
            # Behind the store's back, as someone with the file would.
            with sqlite3.connect(store.path) as db:
                altered = db.execute(
                    "UPDATE records SET body = CAST(replace(CAST(body AS TEXT), "
                    "'original words', 'altered words') AS BLOB) "
                    "WHERE CAST(body AS TEXT) LIKE '%original words%'"
                ).rowcount
            db.close()
            assert altered >= 1
            with pytest.raises(LogTampered):
                await runtime.verify(receipt.conversation_id)


async def test_wait_for_append_wakes_on_the_next_record(make_runtime: Make) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hi")
        await settle(runtime, receipt.submission_id)
        head = len(await runtime.records(receipt.conversation_id))
        # Already past: at once, with the head.
        assert await runtime.wait_for_append(receipt.conversation_id, after=0) == head
        waiting = asyncio.create_task(runtime.wait_for_append(receipt.conversation_id, after=head))
        try:
            more = await runtime.dispatch("echo", "acme", "more")
            async with asyncio.timeout(60):
                woken = await waiting
        finally:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
        assert woken > head  # not the head it was given: it waited for a record after it
        appended = await runtime.records(receipt.conversation_id, after=head)
        assert appended[0].seq == head + 1 and appended[-1].seq >= woken
        await settle(runtime, more.submission_id)
        for after in (-1, MAX_SEQ + 1):
            with pytest.raises(InvalidSeq):
                await runtime.wait_for_append(receipt.conversation_id, after=after)


async def test_at_rest_while_nothing_is_queued_or_running(make_runtime: Make) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    agents = {"loop": loop_agent(slow_tools(60, started, release))}
    async with make_runtime(agents) as runtime:
        receipt = await runtime.dispatch("loop", "acme", "lookup the tides")
        async with asyncio.timeout(60):
            await started.wait()
        assert not await runtime.at_rest(receipt.conversation_id)  # running its tool
        release.set()
        await settle(runtime, receipt.submission_id)
        assert await runtime.at_rest(receipt.conversation_id)
        # Parked for a human counts as at rest: it may wait for days.
        parked = await runtime.dispatch("loop", "acme", "send_email to bob")
        await wait_for_status(runtime, parked.submission_id, SubmissionStatus.WAITING)
        assert await runtime.at_rest(receipt.conversation_id)


async def test_a_queued_submission_is_not_at_rest(make_runtime: Make, store: Store) -> None:
    runtime = make_runtime({"echo": echo_agent()})
    await runtime.start(worker=False)  # an API-only node: what it admits stays queued
    receipt = await runtime.dispatch("echo", "acme", "hi")
    assert (await runtime.submission(receipt.submission_id)).status is SubmissionStatus.QUEUED
    assert not await runtime.at_rest(receipt.conversation_id)
    assert await runtime.at_rest("no such conversation")  # nothing of it waits
