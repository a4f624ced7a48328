"""PostgreSQL specifics of retention's truncation (``Store.truncate_log``): what another
connection does while one runs (appends, a snapshot put), the NOTIFY it sends, the rows it
leaves (no settlement index entry for a removed settlement), an import of a truncated fork's
log, and the indexes behind every statement."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tether.errors import SeqTruncated
from tether.messages import Message, args_digest
from tether.records import (
    ApprovalRequested,
    ConversationCreated,
    LogTruncated,
    Payload,
    Record,
    RecordDraft,
    SettlementStatus,
    SubmissionSettled,
    UserMessage,
    format_time,
)
from tether.store import GateStatus, SessionKey
from tether.store.postgres import PostgresStore
from tether.store.postgres import _truncate as truncate_module
from tether.store.postgres._log import Channels

from ..postgres import POSTGRES_URL, fresh_schema, store_url
from ..processes import eventually_awaited
from .test_query_plans import postgres_scans

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=UTC)


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


def _draft(at: float, payload: Payload | None = None, **kwargs: Any) -> RecordDraft:
    return RecordDraft(
        payload if payload is not None else UserMessage(body=f"message {at}"),
        time=format_time(T0 + timedelta(seconds=at)),
        **kwargs,
    )


async def _records(store: PostgresStore, cid: str) -> list[Record]:
    records: list[Record] = []
    while batch := await store.read(cid, after_seq=records[-1].seq if records else 0):
        records += batch
    return records


async def _log(store: PostgresStore, cid: str, count: int, session: str = "s") -> list[Record]:
    """A conversation of ``count`` records (its ``conversation_created`` first)."""
    await store.ensure_conversation(
        SessionKey("a", "i", session), conversation_id=cid, created_at=T0
    )
    drafts = [_draft(n) for n in range(1, count)]
    await store.append(cid, drafts, expected_seq=1, fence=0)
    return await _records(store, cid)


def _anchor(records: list[Record], through: int, created: Record | None = None) -> RecordDraft:
    """The anchor of a truncation through ``through``, as the engine builds one from the
    records it read (``records``), carrying ``created`` (by default the log's own
    ``conversation_created``, if ``records`` hold it)."""
    [replaced] = [record for record in records if record.seq == through]
    if created is None:
        own = [r for r in records if r.kind == ConversationCreated.KIND and r.seq <= through]
        created = own[-1] if own else None
    payload = LogTruncated(
        last_hash=replaced.hash,
        truncated_at=format_time(T0 + timedelta(days=1)),
        removed=through,
        path=[through],
        parents=[None],
        groups=[(through, 1)],
        messages=[Message.user(f"up to {through}")],
        created=None if created is None else created.to_wire(),
    )
    return RecordDraft(payload, time=replaced.time)


async def _raw(store: PostgresStore, *, autocommit: bool) -> psycopg.AsyncConnection[Any]:
    conn = await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=autocommit)
    await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(store.schema)))
    if not autocommit:
        await conn.commit()
    return conn


async def _stored_bytes(store: PostgresStore, cid: str) -> tuple[int, int]:
    """The conversation row's ``bytes``, and what its stored records add up to."""
    async with await _raw(store, autocommit=True) as conn:
        row = await (
            await conn.execute(
                "SELECT c.bytes, (SELECT sum(length(body)) FROM records "
                "WHERE conversation_id = c.id) FROM conversations c WHERE c.id = %s",
                (cid,),
            )
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def _until_one_waits_for_a_lock(store: PostgresStore) -> None:
    """Polled: the server's lock table, another process's state."""
    async with await _raw(store, autocommit=True) as conn:

        async def waiting() -> bool:
            row = await (
                await conn.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE wait_event_type = 'Lock' AND datname = current_database() "
                    "AND (query LIKE '%%conversations%%' OR query LIKE '%%snapshots%%')"
                )
            ).fetchone()
            return row is not None and row[0] > 0

        await eventually_awaited(waiting, "nothing waited for the conversation's row")


@contextlib.asynccontextmanager
async def _truncating(store: PostgresStore, draft: RecordDraft) -> AsyncIterator[None]:
    """A truncation by ``draft`` done on a connection of its own, committed on leaving."""
    async with await _raw(store, autocommit=False) as conn:
        await truncate_module.truncate_log(conn, "c1", draft, Channels(store.schema))
        yield
        await conn.commit()


async def test_a_snapshot_put_while_a_truncation_commits_is_checked_after_it(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """A snapshot put while a truncation holds the conversation's row waits for its commit,
    then sees the anchor: one of removed records is not kept, one past the anchor is."""
    store, _ = stores
    before = await _log(store, "c1", 6)
    for through, seq, kept in ((3, 2, None), (4, 5, (5, b"past"))):
        async with _truncating(store, _anchor(before, through)):
            put = asyncio.create_task(store.put_snapshot("c1", seq=seq, body=b"past"))
            await _until_one_waits_for_a_lock(store)
            assert not put.done()
        await put
        assert await store.get_snapshot("c1") == kept
    assert await store.verify("c1") == 6


async def test_appends_from_another_process_serialize_with_truncations(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """A writer in another process appends while this one truncates the log again and
    again: every append lands after the anchor, and the chain, the head and the bytes hold."""
    truncating, writing = stores
    original = await _log(truncating, "c1", 3)
    fence = await writing.mint_fence("c1")

    writing_done = asyncio.Event()

    async def write() -> None:
        for n in range(40):
            head = await writing.head("c1")
            await writing.append("c1", [_draft(10 + n)], expected_seq=head, fence=fence)
        writing_done.set()

    async def truncate() -> int:
        done = 0
        while not writing_done.is_set():
            records = await _records(truncating, "c1")
            through = records[-1].seq - 1
            if through > records[0].seq:
                await truncating.truncate_log("c1", _anchor(records, through, original[0]))
                done += 1
            await asyncio.sleep(0.002)  # the point: truncations interleaved with the appends
        return done

    _, truncations = await asyncio.gather(write(), truncate())
    assert truncations > 1  # some, while appends went on
    records = await _records(truncating, "c1")
    assert records[0].kind == LogTruncated.KIND
    assert [r.seq for r in records] == list(range(records[0].seq, 44))
    assert await truncating.verify("c1") == await writing.verify("c1") == 43
    row_bytes, stored = await _stored_bytes(truncating, "c1")
    assert row_bytes == stored


async def test_a_truncation_notifies_the_append_channel(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """Like an append, so that a tailer in another process reads again."""
    store, _ = stores
    before = await _log(store, "c1", 5)
    async with await _raw(store, autocommit=True) as conn:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(f"{store.schema}.append")))
        await store.truncate_log("c1", _anchor(before, 3))
        heard = [n.payload async for n in conn.notifies(timeout=5, stop_after=1)]
    assert heard == ["c1:5"]


async def test_a_removed_settlement_leaves_no_settlement_behind(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """The anchor takes the row of the record it replaces: not its ``submission_id``, which
    only a ``submission_settled`` row carries (one per submission and log)."""
    store, _ = stores
    await _log(store, "c1", 2)
    settled = _draft(5, SubmissionSettled(status=SettlementStatus.SUCCEEDED), submission_id="s1")
    await store.append("c1", [settled, _draft(6)], expected_seq=2, fence=0)
    records = await _records(store, "c1")
    await store.truncate_log("c1", _anchor(records, 3))
    async with await _raw(store, autocommit=True) as conn:
        rows = await (
            await conn.execute(
                "SELECT seq, kind, submission_id FROM records WHERE conversation_id = 'c1' "
                "ORDER BY seq"
            )
        ).fetchall()
    assert rows == [(3, LogTruncated.KIND, None), (4, "user_message", None)]
    assert await store.verify("c1") == 4
    row_bytes, stored = await _stored_bytes(store, "c1")
    assert row_bytes == stored


async def test_a_truncated_fork_imports_with_the_gates_of_its_own_records(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    """A fork's log truncated past its own ``conversation_created``: its records start at the
    anchor, and an import indexes the gates of all of them (none was copied)."""
    store, _ = stores
    await _log(store, "parent", 2)
    key = SessionKey("a", "i", "child")
    # Created after the parent's last record: a conversation_created the store clamped to a
    # later time would not be the one the anchor can carry (check_import compares times).
    at = T0 + timedelta(seconds=2)
    await store.fork("parent", at_seq=2, key=key, new_conversation_id="c1", created_at=at)
    requested = ApprovalRequested(
        approval_id="c1.5", call_id="call", tool="t", args={}, args_digest=args_digest({})
    )
    await store.append("c1", [_draft(3), _draft(4, requested), _draft(5)], expected_seq=3, fence=0)
    await store.truncate_log("c1", _anchor(await _records(store, "c1"), 4))
    gates = [(g.conversation_id, g.seq, g.status) for g in await store.list_gates()]
    assert gates == [("c1", 5, GateStatus.PENDING)]
    conversation, records = await store.get_conversation("c1"), await _records(store, "c1")
    assert [r.seq for r in records] == [4, 5, 6]
    await store.erase_session("c1")
    assert await store.list_gates() == []
    assert await store.import_conversation(conversation, records) is True
    assert [(g.conversation_id, g.seq, g.status) for g in await store.list_gates()] == gates
    assert await store.verify("c1") == 6


async def test_every_statement_of_retention_is_served_by_an_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Truncating (twice), the snapshots around it, a read from before the anchor, forks
    after and before it, verifying, and the export and import of the truncated log."""
    schema = fresh_schema()
    store = await PostgresStore.open(store_url(schema))
    statements: list[tuple[Any, Any]] = []
    try:
        for n in range(4):  # rows for the planner to weigh
            await _log(store, f"other-{n}", 8, session=f"other-{n}")
        before = await _log(store, "c1", 8)
        execute = psycopg.AsyncConnection.execute

        async def tracing(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
            statements.append((query, params))
            return await execute(self, query, params, **kwargs)

        monkeypatch.setattr(psycopg.AsyncConnection, "execute", tracing)
        await store.put_snapshot("c1", seq=2, body=b"2")
        await store.truncate_log("c1", _anchor(before, 3))
        await store.put_snapshot("c1", seq=3, body=b"removed")
        await store.put_snapshot("c1", seq=6, body=b"6")
        await store.truncate_log("c1", _anchor(before, 5))
        await store.read("c1", after_seq=1)
        fork = SessionKey("a", "i", "fork")
        await store.fork("c1", at_seq=6, key=fork, new_conversation_id="c2", created_at=T0)
        with pytest.raises(SeqTruncated):
            await store.fork("c1", at_seq=2, key=fork, new_conversation_id="c3", created_at=T0)
        await store.verify("c1")
        conversation, records = await store.get_conversation("c1"), await _records(store, "c1")
        await store.erase_session("c1")
        await store.import_conversation(conversation, records)
        monkeypatch.undo()
    finally:
        await store.close()
    judged = {str(query) for query, _ in statements}
    assert any("min(seq)" in query for query in judged)
    assert postgres_scans(POSTGRES_URL, schema, statements) == []
