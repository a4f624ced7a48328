"""The migrations that add the gate index (SQLite v8, PostgreSQL v5) backfill it from the
logs already stored: a store whose logs were written before the index existed lists the very
gates the index kept live (a fork's copied gates staying its parent's)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pydantic import JsonValue

from tether.messages import ToolOutcomeStatus, args_digest
from tether.records import ApprovalDecided, ApprovalRequested, RecordDraft, ToolOutcome
from tether.store import Gate, GateStatus, SessionKey, SqliteStore, Store
from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_schema import _MIGRATIONS
from tether.store.postgres import PostgresStore

from ..postgres import POSTGRES_URL, fresh_schema, store_url

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _append(store: Store, cid: str, *drafts: RecordDraft) -> None:
    await store.append(cid, list(drafts), expected_seq=await store.head(cid), fence=0)


def _request(cid: str, seq: int, call: str, tool: str = "mail") -> RecordDraft:
    args: dict[str, JsonValue] = {"to": call}
    requested = ApprovalRequested(
        approval_id=f"{cid}.{seq}",
        call_id=call,
        tool=tool,
        args=args,
        args_digest=args_digest(args),
    )
    return RecordDraft(requested, execution_id="e1", submission_id="s1")


def _outcome(call: str, status: ToolOutcomeStatus) -> RecordDraft:
    return RecordDraft(ToolOutcome(call_id=call, content="x", status=status), execution_id="e1")


async def _write(store: Store) -> list[Gate]:
    """Gates in every status, an outcome that closes nothing, and a fork of them all."""
    conversation, _ = await store.ensure_conversation(
        SessionKey("support", "acme"), conversation_id="conv-1", created_at=T0
    )
    cid = conversation.id
    await _append(store, cid, _request(cid, 2, "c1"), _outcome("c1", ToolOutcomeStatus.DENIED))
    await _append(store, cid, _request(cid, 4, "c2", "pay"))
    decided = ApprovalDecided(
        approval_id=f"{cid}.4",
        call_id="c2",
        decision="edit",
        args={"to": "amy"},
        reason="r",
        approver="ann",
    )
    await store.append_decision(
        cid, [RecordDraft(decided)], expected_seq=await store.head(cid), wake=None
    )
    await _append(store, cid, _outcome("c2", ToolOutcomeStatus.OK), _request(cid, 7, "c3"))
    child = await store.fork(
        cid,
        at_seq=await store.head(cid),
        key=SessionKey("support", "acme", "fork"),
        new_conversation_id="conv-2",
        created_at=T0,
    )
    await _append(store, child.id, _outcome("c3", ToolOutcomeStatus.DENIED))
    await _append(store, child.id, _request(child.id, 10, "c4"))
    gates = await store.list_gates(limit=100)
    assert [(g.approval_id, g.status) for g in gates] == [
        ("conv-1.2", GateStatus.CLOSED),
        ("conv-1.4", GateStatus.DECIDED),
        ("conv-1.7", GateStatus.PENDING),
        ("conv-2.10", GateStatus.PENDING),
    ]
    return gates


async def test_the_sqlite_v8_migration_backfills_the_gates(tmp_path: Path) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    async with await SqliteStore.open(new) as store:
        written = await _write(store)
        path = store.path
    old.mkdir()
    with sqlite3.connect(old / "tether.db") as conn:  # the file as v7 left it: logs, no gates
        conn.create_function("tether_unhex", 1, bytes.fromhex)
        conn.create_function("tether_kind_code", 1, kind_code)
        for step in _MIGRATIONS[:7]:
            conn.executescript(step)
        conn.execute("PRAGMA user_version = 7")
        conn.execute("ATTACH DATABASE ? AS written", (str(path),))
        for table in ("conversations", "records", "snapshots"):  # the columns v7 has
            columns = ", ".join(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
            conn.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM written.{table}")
        conn.commit()
        conn.execute("DETACH DATABASE written")
    conn.close()
    async with await SqliteStore.open(old) as store:
        assert await store.list_gates(limit=100) == written
        assert await store.list_gates(status=GateStatus.PENDING, tool="mail") == written[2:]


@pytest.mark.postgres
async def test_the_postgres_v5_migration_backfills_the_gates() -> None:
    schema = fresh_schema()
    async with await PostgresStore.open(store_url(schema)) as store:
        written = await _write(store)
    async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as conn:
        await conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        await conn.execute("DROP TABLE gates")
        await conn.execute("UPDATE tether_schema SET version = 4")
    async with await PostgresStore.open(store_url(schema)) as store:
        assert await store.list_gates(limit=100) == written
        assert await store.list_gates(status=GateStatus.PENDING, tool="mail") == written[2:]
