"""SQLite specifics of retention's truncation (``Store.truncate_log``): the v11 migration (the
prevHash of a truncated log's first record on its conversation row), how the anchor is
stored, statements served by indexes, reads that stay one statement where they were, a
truncation in the group commit of appends, and the import of a fork of a truncated log."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tether.messages import Message, args_digest
from tether.records import (
    ApprovalRequested,
    LogTruncated,
    Record,
    RecordDraft,
    UserMessage,
    format_time,
)
from tether.store import GateStatus, SqliteStore, Store
from tether.store import _sqlite as sqlite_module
from tether.store import _sqlite_schema as sqlite_schema
from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.testing.storetest import Fixtures


def _schema(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    return [*rows, ("user_version", str(version))]


def _draft(fx: Fixtures, at: float, body: str = "hello") -> RecordDraft:
    return RecordDraft(UserMessage(body=body), id=fx.id("rec"), time=format_time(fx.at(at)))


async def _append(store: Store, cid: str, *drafts: RecordDraft) -> list[Record]:
    return await store.append(cid, list(drafts), expected_seq=await store.head(cid), fence=0)


async def _log(store: Store, fx: Fixtures, cid: str, records: int = 6) -> list[Record]:
    """A conversation of ``records`` records (its conversation_created and user messages)."""
    conversation, _ = await store.ensure_conversation(
        fx.key(cid), conversation_id=cid, created_at=fx.at(0)
    )
    await _append(store, conversation.id, *(_draft(fx, n) for n in range(1, records)))
    return await store.read(cid)


def _anchor(fx: Fixtures, records: list[Record], through: int) -> RecordDraft:
    """The anchor the engine would build to truncate ``records`` (a log from seq 1)."""
    [replaced] = [record for record in records if record.seq == through]
    payload = LogTruncated(
        last_hash=replaced.hash,
        truncated_at=format_time(fx.at(100)),
        removed=through,
        path=[through],
        parents=[None],
        groups=[(through, 1)],
        messages=[Message.user(f"all of it up to {through}")],
        created=records[0].to_wire(),
    )
    return RecordDraft(payload, id=fx.id("cut"), time=replaced.time)


def _stored(path: Path, cid: str) -> tuple[list[tuple[int, Any]], bytes | None]:
    """The (seq, kind column) of ``cid``'s records rows, and its row's first_prev_hash."""
    with sqlite3.connect(path) as conn:
        number, first_prev_hash = conn.execute(
            "SELECT number, first_prev_hash FROM conversations WHERE id = ?", (cid,)
        ).fetchone()
        rows = conn.execute(
            "SELECT seq, kind FROM records WHERE conversation = ? ORDER BY seq", (number,)
        ).fetchall()
    conn.close()
    return rows, first_prev_hash


async def test_a_version_10_file_migrates_to_the_fresh_schema(tmp_path: Path) -> None:
    """A v10 file reads and verifies as before (no log of it starts past seq 1), and its logs
    truncate, fork and verify afterwards; the file ends with exactly the schema of a fresh
    one."""
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        fx = Fixtures(store)
        records = await _log(store, fx, "conv-a")
        fork = await store.fork(
            "conv-a",
            at_seq=3,
            key=fx.key("fork"),
            new_conversation_id="conv-f",
            created_at=fx.at(9),
        )
        forked = await store.read(fork.id)
        await store.put_snapshot("conv-a", seq=4, body=b"snap")
    old.mkdir()
    with sqlite3.connect(old / "tether.db") as conn:
        conn.create_function("tether_unhex", 1, bytes.fromhex)
        conn.create_function("tether_kind_code", 1, kind_code)
        for step in _MIGRATIONS[:10]:
            conn.executescript(step)
        conn.execute("PRAGMA user_version = 10")
        conn.execute("ATTACH DATABASE ? AS written", (str(written / "tether.db"),))
        for table in ("records", "snapshots", "attachment_refs"):
            conn.execute(f"INSERT INTO {table} SELECT * FROM written.{table}")
        columns = ", ".join(
            row[1] for row in conn.execute("PRAGMA table_info(conversations)").fetchall()
        )
        conn.execute(  # the v10 columns only: v11 added its own at the end
            f"INSERT INTO conversations ({columns}) SELECT {columns} FROM written.conversations"
        )
        conn.commit()
        conn.execute("DETACH DATABASE written")
    conn.close()
    async with await SqliteStore.open(old) as store:
        fx = Fixtures(store)
        assert await store.read("conv-a") == records
        assert await store.read("conv-f") == forked
        assert (await store.verify("conv-a"), await store.verify("conv-f")) == (6, 4)
        assert _stored(old / "tether.db", "conv-a")[1] is None
        truncated = await store.truncate_log("conv-a", _anchor(fx, records, 4))
        assert (truncated.removed, truncated.first_seq) == (4, 4)
        assert await store.get_snapshot("conv-a") is None
        after = await store.read("conv-a")
        assert [record.seq for record in after] == [4, 5, 6]
        assert after[0].prev_hash == records[3].prev_hash
        assert await store.verify("conv-a") == 6
        child = await store.fork(
            "conv-a",
            at_seq=5,
            key=fx.key("late"),
            new_conversation_id="conv-l",
            created_at=fx.at(9),
        )
        assert (await store.read(child.id))[:2] == after[:2]
        assert await store.verify(child.id) == 6
    async with await SqliteStore.open(fresh):
        pass
    assert _schema(old / "tether.db") == _schema(fresh / "tether.db")
    assert _schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


async def test_the_anchor_is_a_row_with_its_code_and_its_prev_hash_is_the_conversations(
    tmp_path: Path,
) -> None:
    """The records rows hold no prevHash (each is the hash of the row before): the anchor's,
    a removed record's hash, is kept on the conversation row, and a fork or an import of the
    truncated log keeps it there too. A log truncated at seq 1 has none to keep."""
    async with await SqliteStore.open(tmp_path) as store:
        fx = Fixtures(store)
        records = await _log(store, fx, "conv-a")
        await store.truncate_log("conv-a", _anchor(fx, records, 3))
        rows, first_prev_hash = _stored(store.path, "conv-a")
        assert rows == [(3, kind_code(LogTruncated.KIND)), (4, 1), (5, 1), (6, 1)]
        assert kind_code(LogTruncated.KIND) == 21  # one byte, not a name
        assert (
            first_prev_hash == bytes.fromhex(records[2].prev_hash) == bytes.fromhex(records[1].hash)
        )
        fork = await store.fork(
            "conv-a",
            at_seq=4,
            key=fx.key("fork"),
            new_conversation_id="conv-f",
            created_at=fx.at(9),
        )
        assert _stored(store.path, fork.id)[1] == first_prev_hash
        conversation = await store.get_conversation("conv-a")
        exported = await store.read("conv-a")
        await store.erase_session("conv-a")
        assert await store.import_conversation(conversation, exported) is True
        assert _stored(store.path, "conv-a")[1] == first_prev_hash
        assert await store.read("conv-a") == exported
        assert await store.import_conversation(conversation, exported) is False

        at_one = await _log(store, fx, "conv-b", 3)
        await store.truncate_log("conv-b", _anchor(fx, at_one, 1))
        rows, first_prev_hash = _stored(store.path, "conv-b")
        assert (rows[0], first_prev_hash) == ((1, kind_code(LogTruncated.KIND)), None)
        assert (await store.read("conv-b"))[0].prev_hash == ""
        assert await store.verify("conv-b") == 3


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


_SCAN = re.compile(r"^SCAN (records|conversations|snapshots)\b")
_JUDGED = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)


def _scans(path: Path, statements: list[str]) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [
            f"{row[3]}  <-  {statement}"
            for statement in sorted(set(statements))
            if _JUDGED.match(statement)
            for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}").fetchall()
            if _SCAN.match(row[3])
        ]
    finally:
        conn.close()


async def test_every_statement_of_a_truncation_is_served_by_an_index(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    store, statements = traced
    fx = Fixtures(store)
    for n in range(5):  # rows for the planner to weigh
        await _log(store, fx, f"conv-{n}")
    records = await store.read("conv-0")
    statements.clear()
    await store.put_snapshot("conv-0", seq=3, body=b"snap")
    await store.truncate_log("conv-0", _anchor(fx, records, 3))
    await store.put_snapshot("conv-0", seq=2, body=b"stale")
    await store.read("conv-0")
    await store.fork(
        "conv-0", at_seq=4, key=fx.key("fork"), new_conversation_id="conv-f", created_at=fx.at(9)
    )
    await store.truncate_log("conv-0", _anchor(fx, records, 5))
    assert any("first_prev_hash" in statement for statement in statements)
    assert _scans(store.path, statements) == []


async def test_a_read_is_one_statement_unless_it_starts_before_an_anchor(
    traced: tuple[SqliteStore, list[str]],
) -> None:
    """Reads of a log from seq 1, and from or past a truncated log's anchor, run the one
    statement they ran before; one from before an anchor reads the anchor's prevHash in the
    same snapshot as the records."""
    store, statements = traced
    fx = Fixtures(store)
    records = await _log(store, fx, "conv-a")
    statements.clear()
    assert await store.read("conv-a") == records
    assert len(statements) == 1
    await store.truncate_log("conv-a", _anchor(fx, records, 3))
    for after_seq in (3, 4):
        statements.clear()
        assert await store.read("conv-a", after_seq=after_seq) == records[after_seq:]
        assert len(statements) == 1
    statements.clear()
    [anchor, *rest] = await store.read("conv-a", after_seq=1)
    assert (anchor.seq, anchor.prev_hash, rest) == (3, records[2].prev_hash, records[3:])
    assert statements[0].startswith("SELECT") and statements[1] == "BEGIN"
    assert statements[-1] == "COMMIT" and any("first_prev_hash" in s for s in statements)


async def test_a_truncation_in_the_group_commit_of_appends(tmp_path: Path) -> None:
    """Appends before and after a truncation in the same commit (the writer's cached head
    state is dropped around it) chain on from the anchor: through the head, whose bytes and
    time the next append's seal reads, and short of it."""
    # The writer thread is held below: every write queues for it, none commits on the loop.
    async with await SqliteStore.open(tmp_path, inline_commits=False) as store:
        fx = Fixtures(store)
        records = await _log(store, fx, "conv-a")
        other = await _log(store, fx, "conv-b")
        entered, release = threading.Event(), threading.Event()

        def hold(conn: sqlite3.Connection, touched: list[str]) -> None:
            entered.set()
            release.wait(10)

        held = asyncio.ensure_future(store._writer.submit(hold))
        assert await asyncio.to_thread(entered.wait, 10)  # the writer thread is held: the
        commits = store.commits
        writes = asyncio.gather(
            store.truncate_log("conv-a", _anchor(fx, records, 6)),
            store.append("conv-a", [_draft(fx, 7)], expected_seq=6, fence=0),
            store.append("conv-b", [_draft(fx, 7)], expected_seq=6, fence=0),
            store.truncate_log("conv-b", _anchor(fx, other, 3)),
            store.append("conv-b", [_draft(fx, 8)], expected_seq=7, fence=0),
        )
        await asyncio.sleep(0)  # one loop iteration: the rest queue up behind it, all of them
        release.set()
        await held
        truncated_a, [seventh], _, truncated_b, _ = await writes
        assert store.commits == commits + 2  # the held one, then all of the rest together
        assert (truncated_a.first_seq, truncated_b.first_seq) == (6, 3)
        assert seventh.prev_hash == records[-1].hash
        assert [record.seq for record in await store.read("conv-a")] == [6, 7]
        assert await store.verify("conv-a") == 7
        assert [record.seq for record in await store.read("conv-b")] == [3, 4, 5, 6, 7, 8]
        assert await store.verify("conv-b") == 8


async def test_an_imported_fork_of_a_truncated_log_indexes_its_own_gates(tmp_path: Path) -> None:
    """A fork's log starts at its parent's anchor when it copied a truncated log: the gates
    an import derives are those of the records from its own conversation_created on, found by
    seq (not by their place in the list)."""
    async with await SqliteStore.open(tmp_path) as store:
        fx = Fixtures(store)
        records = await _log(store, fx, "conv-a")
        await store.truncate_log("conv-a", _anchor(fx, records, 3))
        fork = await store.fork(
            "conv-a",
            at_seq=4,
            key=fx.key("fork"),
            new_conversation_id="conv-f",
            created_at=fx.at(9),
        )
        requested = ApprovalRequested(
            approval_id="conv-f.6", call_id="c", tool="t", args={}, args_digest=args_digest({})
        )
        await _append(store, fork.id, RecordDraft(requested, id=fx.id("rec")))
        [gate] = await store.list_gates()
        exported = await store.read(fork.id)
        assert [record.seq for record in exported] == [3, 4, 5, 6]
        await store.erase_session(fork.id)
        assert await store.list_gates() == []
        assert await store.import_conversation(fork, exported) is True
        assert await store.list_gates() == [gate]
        assert gate.status is GateStatus.PENDING and gate.seq == 6
