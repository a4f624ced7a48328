"""PostgreSQL specifics of sessions (issue 22): an append keeps the sessions index in the one
statement it already was, an erase racing appends (or another erase sharing an attachment)
on other connections, the v7 migration's backfill, and the indexes behind every statement."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tether.errors import ConversationNotFound, SubmissionNotFound
from tether.records import AttachmentRef, RecordDraft, UserMessage, format_time
from tether.store import (
    ClaimSettlement,
    NewSubmission,
    ScheduleRow,
    SessionKey,
    SessionRow,
    Submission,
)
from tether.store.postgres import PostgresStore

from ..postgres import POSTGRES_URL, fresh_schema, store_url

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=UTC)
_TABLES = ("records", "conversations", "submissions", "attempts", "snapshots", "attachments")
_SCAN = re.compile(
    rf"Seq Scan on ({'|'.join((*_TABLES, 'gates', 'attachment_refs', 'schedules'))})\b"
)


@pytest.fixture
async def stores() -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores (two pools, so two connections) on one schema, as two processes have."""
    url = store_url(fresh_schema())
    first = await PostgresStore.open(url)
    second = await PostgresStore.open(url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


def _said(at: float, *refs: AttachmentRef, body: str = "hello") -> RecordDraft:
    return RecordDraft(
        UserMessage(body=body, attachments=refs or None),
        time=format_time(T0 + timedelta(seconds=at)),
    )


async def _open(store: PostgresStore, cid: str, at: float = 0, *, agent: str = "a") -> str:
    key = SessionKey(agent, "i", cid)
    conversation, _ = await store.ensure_conversation(
        key, conversation_id=cid, created_at=T0 + timedelta(seconds=at)
    )
    return conversation.id


async def _append(store: PostgresStore, cid: str, *drafts: RecordDraft) -> None:
    await store.append(cid, list(drafts), expected_seq=await store.head(cid), fence=0)


async def _rows(schema: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        return await (await conn.execute(query, params)).fetchall()


async def _left_of(schema: str, cid: str) -> dict[str, int]:
    """What rows of ``cid`` any table still holds."""
    counts = {}
    for table, column in (
        ("conversations", "id"),
        ("records", "conversation_id"),
        ("gates", "conversation_id"),
        ("snapshots", "conversation_id"),
        ("attachment_refs", "conversation_id"),
        ("submissions", "conversation_id"),
    ):
        [(count,)] = await _rows(schema, f"SELECT count(*) FROM {table} WHERE {column} = %s", cid)
        counts[table] = count
    return {table: count for table, count in counts.items() if count}


def _expected(row: SessionRow, records: list[Any]) -> tuple[Any, ...]:
    return (
        row.records,
        row.bytes,
        row.last_activity_at,
    ), (
        len(records),
        sum(len(r.canonical) for r in records),
        datetime.fromisoformat(records[-1].time),
    )


async def test_an_append_keeps_the_index_in_its_one_statement(
    stores: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer appending after its own last append runs one statement, attachments or not:
    the head, last activity, bytes and references move in it."""
    store = stores[0]
    cid = await _open(store, "c1")
    ref = await store.put_attachment(b"pic", media_type="image/png")
    await store.read(cid)
    statements: list[Any] = []
    execute = psycopg.AsyncConnection.execute

    async def counting(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        statements.append(query)
        return await execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counting)
    await store.append(cid, [_said(1)], expected_seq=1, fence=0)
    await store.append(cid, [_said(2, ref), _said(3)], expected_seq=2, fence=0)
    assert len(statements) == 2
    monkeypatch.undo()
    [row] = await store.list_sessions()
    records = await store.read(cid)
    got, want = _expected(row, records)
    assert got == want and row.last_activity_at == T0 + timedelta(seconds=3)
    refs = await _rows(store.schema, "SELECT conversation_id, digest FROM attachment_refs")
    assert refs == [(cid, ref.digest)]
    # Another process's store runs the checked path: the same bookkeeping.
    await stores[1].append(cid, [_said(4, ref)], expected_seq=4, fence=0)
    [row] = await store.list_sessions()
    got, want = _expected(row, await store.read(cid))
    assert got == want
    assert len(await _rows(store.schema, "SELECT 1 FROM attachment_refs")) == 1


async def _append_until_erased(
    store: PostgresStore,
    cid: str,
    head: int,
    claimed: Submission,
    ref: AttachmentRef,
    settling: bool,
) -> int:
    """Append from ``head`` (settling the claim on the fifth, if ``settling``) until the
    conversation is gone; how many appends committed. (The head is read before the race: an
    erase with no delay may come before any append, or any read.)"""
    appended = 0
    while True:
        drafts = [_said(head, ref), _said(head)]
        try:
            if settling and appended == 5:
                settle = ClaimSettlement(claimed.id, str(claimed.attempt_id), {}, T0)
                await store.append_settled(
                    cid, drafts, expected_seq=head, fence=claimed.fence, settle=settle
                )
            else:
                await store.append(cid, drafts, expected_seq=head, fence=claimed.fence)
        except (ConversationNotFound, SubmissionNotFound):  # a settlement checks its claim first
            return appended
        head += 2
        appended += 1


async def _erase_after(store: PostgresStore, cid: str, delay: float) -> int:
    await asyncio.sleep(delay)  # the point: an erasure at a drawn moment of the writes
    return (await store.erase_session(cid)).records


@pytest.mark.parametrize("settling", [False, True])
async def test_an_erase_racing_appends_leaves_nothing(
    stores: tuple[PostgresStore, PostgresStore], settling: bool
) -> None:
    """Appends (one-statement and checked, plain and settling) on one connection while an
    erase runs on another: each append commits wholly before the erase, or finds no
    conversation; nothing of the conversation is left behind."""
    writer, eraser = stores
    ref = await writer.put_attachment(b"pic", media_type="image/png")
    for round_ in range(15):
        cid = f"c{round_}"
        admitted = await writer.admit(
            NewSubmission(
                id=f"s{round_}",
                key=SessionKey("a", "i", cid),
                conversation_id=cid,
                input={"kind": "message", "body": "hi"},
                created_at=T0,
            )
        )
        claimed = await writer.claim(
            admitted.submission.id,
            attempt_id=f"att{round_}",
            owner_id="o",
            lease_expires_at=T0 + timedelta(hours=1),
            now=T0,
        )
        head = await writer.head(cid)
        appended, erased = await asyncio.wait_for(
            asyncio.gather(
                _append_until_erased(writer, cid, head, claimed, ref, settling),
                _erase_after(eraser, cid, 0.005 * (round_ % 5)),
            ),
            60,
        )
        assert erased == 1 + 2 * appended  # every committed append, and nothing after
        assert await _left_of(writer.schema, cid) == {}
        with pytest.raises(ConversationNotFound):
            await writer.append(cid, [_said(0)], expected_seq=erased, fence=claimed.fence)
    # No conversation references the attachment any more: the first erase took it.
    assert await _rows(writer.schema, "SELECT digest FROM attachments") == []


async def test_two_erases_sharing_an_attachment_remove_it_once(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Each erase locks the attachments before it looks for other references: one of them
    removes it (none keeps it for the other)."""
    first, second = stores
    for round_ in range(20):
        ref = await first.put_attachment(f"shared {round_}".encode(), media_type="text/plain")
        own = await first.put_attachment(f"own {round_}".encode(), media_type="text/plain")
        one = await _open(first, f"one{round_}")
        two = await _open(first, f"two{round_}")
        await _append(first, one, _said(1, ref, own))
        await _append(first, two, _said(2, ref))
        erased = await asyncio.gather(first.erase_session(one), second.erase_session(two))
        removed = sorted(digest for e in erased for digest in e.attachments)
        assert removed == sorted([ref.digest, own.digest])
    assert await _rows(first.schema, "SELECT digest FROM attachments") == []
    assert await _rows(first.schema, "SELECT digest FROM attachment_refs") == []


async def _written(store: PostgresStore) -> None:
    """Logs with attachments, a fork that copies some, a task child, a schedule."""
    ref = await store.put_attachment(b"pic", media_type="image/png")
    other = await store.put_attachment(b"doc", media_type="text/plain")
    one = await _open(store, "one", 1)
    await _append(store, one, _said(2, ref), _said(3, body="x" * 300))
    await _append(store, one, _said(4, other))
    await store.fork(
        one,
        at_seq=3,
        key=SessionKey("a", "i", "fork"),
        new_conversation_id="forked",
        created_at=T0 + timedelta(seconds=5),
    )
    two = await _open(store, "two", 6, agent="b")
    await _append(store, two, _said(7))
    await store.put_schedule(ScheduleRow("sched", {"every": 60}, T0))


async def test_the_v7_migration_backfills_the_sessions_index() -> None:
    schema = fresh_schema()
    async with await PostgresStore.open(store_url(schema)) as store:
        await _written(store)
        listed = await store.list_sessions()
        refs = await _rows(schema, "SELECT * FROM attachment_refs ORDER BY 1, 2")
    assert [row.conversation_id for row in listed] == ["two", "forked", "one"]
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await conn.execute("DROP TABLE attachment_refs")
        await conn.execute("ALTER TABLE conversations DROP COLUMN last_activity_at")
        await conn.execute("ALTER TABLE conversations DROP COLUMN bytes")
        await conn.execute("UPDATE tether_schema SET version = 6")
    async with await PostgresStore.open(store_url(schema)) as store:
        assert await store.list_sessions() == listed
        assert await _rows(schema, "SELECT * FROM attachment_refs ORDER BY 1, 2") == refs
        assert (await store.erase_session("one")).attachments == (
            (await store.put_attachment(b"doc", media_type="text/plain")).digest,
        )
        assert len((await store.erase_session("forked")).attachments) == 1
    # The step run again over what it already made (a schema set back) changes nothing.
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(
            sql.SQL("UPDATE {}.tether_schema SET version = 6").format(sql.Identifier(schema))
        )
    async with await PostgresStore.open(store_url(schema)) as store:
        assert [row.conversation_id for row in await store.list_sessions()] == ["two"]
        assert [s.id for s in await store.list_schedules()] == ["sched"]


def _scans(schema: str, statements: list[tuple[Any, Any]]) -> list[str]:
    found: list[str] = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("SET enable_seqscan = off")
        for query, params in statements:
            text = query if isinstance(query, str) else query.as_string(conn)
            if not re.match(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", text, re.IGNORECASE):
                continue
            with conn.transaction(force_rollback=True):
                plan = conn.execute(f"EXPLAIN {text}", params).fetchall()
            found += [f"{row[0].strip()}  <-  {text}" for row in plan if _SCAN.search(row[0])]
    return found


async def test_every_sessions_statement_is_served_by_an_index(
    stores: tuple[PostgresStore, PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing (every filter, every page), appends with attachments, a fork, an erase, an
    import and the schedules: no statement reads a growing table whole."""
    store = stores[0]
    await _written(store)
    conversation = await store.get_conversation("two")
    records = await store.read("two")
    statements: list[tuple[Any, Any]] = []
    execute = psycopg.AsyncConnection.execute

    async def tracing(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        statements.append((query, params))
        return await execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", tracing)
    every: tuple[dict[str, Any], ...] = ({}, {"agent": "a"}, {"agent": "a", "instance": "i"})
    for filters in every:
        page = await store.list_sessions(limit=1, **filters)
        await store.list_sessions(limit=1, after=page[-1].cursor, **filters)
    ref = await store.put_attachment(b"new", media_type="text/plain")
    await store.read("one")
    await _append(store, "one", _said(9, ref))  # the one-statement path
    await stores[1].append("one", [_said(10, ref)], expected_seq=5, fence=0)  # the checked one
    await store.fork(
        "one",
        at_seq=2,
        key=SessionKey("a", "i", "fork2"),
        new_conversation_id="forked2",
        created_at=T0,
    )
    await store.erase_session("one")
    await store.erase_session("two")
    assert await store.import_conversation(conversation, records)
    assert not await store.import_conversation(conversation, records)
    await store.put_schedule(ScheduleRow("sched", {"every": 60}, T0))
    await store.put_schedule(ScheduleRow("other", {"every": 5}, T0))
    await store.list_schedules()
    await store.delete_schedule("other")
    monkeypatch.undo()
    judged = " ".join(str(query) for query, _ in statements)
    for table in ("attachment_refs", "last_activity_at", "schedules", "DELETE FROM records"):
        assert table in judged
    assert _scans(store.schema, statements) == []
