"""SQLite specifics of the sessions index, erasure and schedules: the v10 migration (each
conversation's last activity and size, and the attachments its records reference, derived
from the logs already stored), and an append path that keeps the index at the cost of the
UPDATE it ran before (one statement more only for records that carry attachments)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tether.records import AttachmentRef, RecordDraft, SteerReceived, UserMessage, format_time
from tether.store import ClaimSettlement, SessionKey, SqliteStore
from tether.store import _sqlite as sqlite_module
from tether.store import _sqlite_schema as sqlite_schema
from tether.store import _sqlite_sessions as sqlite_sessions
from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.testing.storetest import CompleteStore, Fixtures

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _schema(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    return [*rows, ("user_version", str(version))]


def _draft(at: float, body: str = "hi", *refs: AttachmentRef) -> RecordDraft:
    return RecordDraft(
        UserMessage(body=body, attachments=refs or None),
        time=format_time(T0 + timedelta(seconds=at)),
    )


async def _append(store: CompleteStore, cid: str, *drafts: RecordDraft, fence: int = 0) -> None:
    await store.append(cid, list(drafts), expected_seq=await store.head(cid), fence=fence)


async def _write(store: CompleteStore) -> tuple[AttachmentRef, AttachmentRef]:
    """Logs of two agents and instances, a fork and a snapshot, and two attachments:
    one shared by two logs (and copied by the fork), one only its log's."""
    fx = Fixtures(store)
    shared = await store.put_attachment(b"shared", media_type="text/plain")
    own = await store.put_attachment(b"own", media_type="image/png")
    running = await fx.claim(await fx.admit("a"))
    a = running.conversation_id
    await _append(store, a, _draft(1, "look", own, shared), _draft(2), fence=running.fence)
    await store.put_snapshot(a, seq=2, body=b"snap")
    fork = await store.fork(
        a, at_seq=2, key=fx.key("fork"), new_conversation_id="conv-fork", created_at=T0
    )
    await _append(store, fork.id, _draft(3))
    b, _ = await store.ensure_conversation(
        SessionKey("support", "globex", "b"), conversation_id="conv-b", created_at=T0
    )
    steer = SteerReceived(body="see", mode="steer", attachments=(shared,))
    await _append(store, b.id, RecordDraft(steer, time=format_time(T0 + timedelta(seconds=4))))
    c, _ = await store.ensure_conversation(
        SessionKey("sales", "acme", "c"), conversation_id="conv-c", created_at=T0
    )
    await _append(store, c.id, _draft(5, "x" * 400))
    return shared, own


async def test_a_version_9_file_migrates_to_the_fresh_schema(tmp_path: Path) -> None:
    """A v9 file lists the very sessions rows the index keeps live, and its erasures remove
    the attachments they would have; the file ends with exactly the schema of a fresh one."""
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        shared, own = await _write(store)
        rows = await store.list_sessions()
        filtered = await store.list_sessions(agent="support", instance="acme")
    old.mkdir()
    with sqlite3.connect(old / "tether.db") as conn:
        conn.create_function("tether_unhex", 1, bytes.fromhex)
        conn.create_function("tether_kind_code", 1, kind_code)
        for step in _MIGRATIONS[:9]:
            conn.executescript(step)
        conn.execute("PRAGMA user_version = 9")
        conn.execute("ATTACH DATABASE ? AS written", (str(written / "tether.db"),))
        for table in ("records", "snapshots", "attempts", "attachments"):
            conn.execute(f"INSERT INTO {table} SELECT * FROM written.{table}")
        # The v9 columns only: later steps added theirs.
        for table in ("conversations", "gates", "submissions"):
            columns = ", ".join(
                row[1] for row in conn.execute(f"PRAGMA table_info({table})").fetchall()
            )
            conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM written.{table}")
        conn.commit()
        conn.execute("DETACH DATABASE written")
    conn.close()
    async with await SqliteStore.open(old) as store:
        assert [row.conversation_id for row in rows] == [
            "conv-c",
            "conv-b",
            "conv-fork",
            rows[3].conversation_id,
        ]
        assert await store.list_sessions() == rows
        assert await store.list_sessions(agent="support", instance="acme") == filtered
        a = rows[3].conversation_id
        erased = await store.erase_session(a)
        assert (erased.records, erased.submissions, erased.snapshot) == (3, 1, True)
        assert erased.attachments == ()  # the fork copied both references
        assert (await store.erase_session("conv-fork")).attachments == (own.digest,)
        assert (await store.erase_session("conv-b")).attachments == (shared.digest,)
    async with await SqliteStore.open(fresh):
        pass
    assert _schema(old / "tether.db") == _schema(fresh / "tether.db")
    assert _schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.fixture
async def traced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SqliteStore, list[str]]]:
    """A store, and every statement its connections run from now on."""
    statements: list[str] = []
    connect = sqlite_schema.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite_module, "connect", tracing)
    async with await SqliteStore.open(tmp_path, inline_commits=True) as store:
        yield store, statements


def _writes(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith(("INSERT", "UPDATE", "DELETE"))]


async def test_an_append_keeps_the_index_in_the_update_it_ran_before(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    """A plain append (the hot path, bulk or checked) writes its records and one UPDATE of
    its conversation's row, as before the index; a record with attachments adds one INSERT,
    and so do messages (their words, for search: one statement per batch)."""
    store, statements = traced
    fx = Fixtures(store)
    ref = await store.put_attachment(b"pic", media_type="image/png")
    running = await fx.claim(await fx.admit())
    cid = running.conversation_id
    statements.clear()
    await _append(store, cid, _draft(1), _draft(2), fence=running.fence)
    writes = _writes(statements)
    assert [s.split(" (")[0].split(" SET")[0] for s in writes] == [
        "INSERT INTO session_text",
        "INSERT INTO session_text",
        "INSERT INTO records",
        "UPDATE conversations",
    ]
    assert "last_activity" in writes[3] and "bytes" in writes[3]
    statements.clear()
    await _append(store, cid, _draft(3, "look", ref), fence=running.fence)
    assert [s for s in _writes(statements) if "attachment_refs" in s] == [
        "INSERT INTO attachment_refs (digest, conversation_id) VALUES "
        f"('{ref.digest}', '{cid}') ON CONFLICT DO NOTHING"
    ]
    statements.clear()
    settle = ClaimSettlement(running.id, str(running.attempt_id), {}, fx.at(9))
    await store.append_settled(cid, [_draft(4)], expected_seq=4, fence=running.fence, settle=settle)
    assert not [s for s in _writes(statements) if "attachment_refs" in s]
    assert len([s for s in _writes(statements) if s.startswith("UPDATE conversations")]) == 1
    [row] = await store.list_sessions()
    assert (row.records, row.last_activity_at) == (5, T0 + timedelta(seconds=4))
    assert row.bytes == sum(len(record.canonical) for record in await store.read(cid))


async def test_pages_keep_the_exact_order_where_the_index_floors_trail_it(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    """Appends within a second of a conversation's activity floor leave its index entries
    alone (their UPDATE names no floor), so the index order can be the reverse of the exact
    one; every page, of any size, is still in exact order, and the pages cover every row."""
    store, statements = traced
    count = 40
    ids = []
    for n in range(count):
        conversation, _ = await store.ensure_conversation(
            SessionKey("support", "acme", f"s{n:02}"),
            conversation_id=f"conv-{n:02}",
            created_at=T0 + timedelta(seconds=n / 100),
        )
        ids.append(conversation.id)
    statements.clear()
    for n, cid in enumerate(ids):  # the later created, the earlier its latest activity
        await _append(store, cid, RecordDraft(UserMessage(body="hi"), time=_at(0.95 - n / 100)))
    moves = [s for s in statements if s.startswith("UPDATE conversations")]
    assert len(moves) == count and not [s for s in moves if "activity_floor" in s]
    with sqlite3.connect(store.path) as conn:
        floors = conn.execute("SELECT activity_floor FROM conversations ORDER BY id").fetchall()
    conn.close()
    assert [floor for (floor,) in floors] == sorted(floor for (floor,) in floors)  # by creation
    exact = [f"conv-{n:02}" for n in range(count)]
    for limit in (1, 2, 3, 7, 40, 50):
        seen: list[str] = []
        page = await store.list_sessions(limit=limit)
        while page:
            seen += [row.conversation_id for row in page]
            page = await store.list_sessions(limit=limit, after=page[-1].cursor)
        assert seen == exact, limit
    [first] = await store.list_sessions(limit=1)
    assert first.last_activity_at == T0 + timedelta(seconds=0.95)


async def test_an_activity_more_than_a_second_past_the_floor_moves_it(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    store, statements = traced
    conversation, _ = await store.ensure_conversation(
        SessionKey("support", "acme"), conversation_id="conv-a", created_at=T0
    )
    for at, moves in ((0.5, False), (1.0, False), (1.2, True), (2.1, False), (2.3, True)):
        statements.clear()
        await _append(store, conversation.id, RecordDraft(UserMessage(body="x"), time=_at(at)))
        [update] = [s for s in statements if s.startswith("UPDATE conversations")]
        assert ("activity_floor" in update) == moves, at
    [row] = await store.list_sessions()
    assert row.last_activity_at == T0 + timedelta(seconds=2.3)


def _at(seconds: float) -> str:
    return format_time(T0 + timedelta(seconds=seconds))


class _Recording(sqlite3.Connection):
    """A connection that keeps every statement it executes with its parameters."""

    executed: list[tuple[str, Any]]

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.executed.append((sql, parameters))
        return super().execute(sql, parameters)


@pytest.mark.parametrize(
    ("agent", "instance"), [(None, None), ("support", None), ("support", "acme")]
)
async def test_a_page_seeks_its_index_with_bound_parameters(
    tmp_path: Path, agent: str | None, instance: str | None
) -> None:
    """As executed (parameters bound, not inlined): a range of the index, never a scan of it
    from the newest entry, which would make every later page cost all the pages before it."""
    async with await SqliteStore.open(tmp_path) as store:
        for n in range(3):
            await store.ensure_conversation(
                SessionKey("support", "acme", f"s{n}"), conversation_id=f"c{n}", created_at=T0
            )
    conn = sqlite3.connect(tmp_path / "tether.db", factory=_Recording)
    conn.executed = []
    try:
        [first] = sqlite_sessions.list_sessions(conn, agent, instance, 1, None)
        sqlite_sessions.list_sessions(conn, agent, instance, 1, first.cursor)
        executed, conn.executed = conn.executed, []
        plans = [
            detail
            for sql, parameters in executed
            for *_, detail in conn.execute(f"EXPLAIN QUERY PLAN {sql}", parameters).fetchall()
        ]
    finally:
        conn.close()
    assert plans and all(p.startswith("SEARCH") and "activity_floor<" in p for p in plans), plans
