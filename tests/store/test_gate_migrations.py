"""The migrations that add the gate index (SQLite v8, PostgreSQL v5) backfill it from the
logs already stored: a store whose logs were written before the index existed lists the very
gates the index kept live, input gates among them (a fork's copied gates staying its
parent's). The migrations that add the gate kinds (SQLite v12, PostgreSQL v8) keep every
gate already indexed, as an approval."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from pydantic import JsonValue

from tether.messages import Mediation, ToolOutcomeStatus, args_digest
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    InputAnswered,
    InputRequested,
    RecordDraft,
    ToolCalled,
    ToolOutcome,
)
from tether.store import Gate, GateKind, GateStatus, SessionKey, SqliteStore
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore

from ..postgres import POSTGRES_URL, fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def _append(store: CompleteStore, cid: str, *drafts: RecordDraft) -> None:
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


def _ask(cid: str, seq: int, call: str) -> list[RecordDraft]:
    """The call and its input request (at ``seq``), as ``Turn.ask`` writes them."""
    called = ToolCalled(
        call_id=call, tool="ask", args={}, idempotency_key=call, mediation=Mediation.INPUT
    )
    requested = InputRequested(
        input_id=f"{cid}.{seq}",
        call_id=call,
        tool="ask",
        args={"q": call},
        prompt=f"{call}?",
        answer_schema={"type": "string"},
    )
    return [
        RecordDraft(called, execution_id="e1", submission_id="s1"),
        RecordDraft(requested, execution_id="e1", submission_id="s1"),
    ]


def _outcome(call: str, status: ToolOutcomeStatus) -> RecordDraft:
    return RecordDraft(ToolOutcome(call_id=call, content="x", status=status), execution_id="e1")


async def _write(store: CompleteStore) -> list[Gate]:
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
    await _append(store, cid, *_ask(cid, 9, "a1"), *_ask(cid, 11, "a2"), *_ask(cid, 13, "a3"))
    answered = InputAnswered(input_id=f"{cid}.9", call_id="a1", value={"v": 1}, responder="bob")
    await store.append_decision(
        cid, [RecordDraft(answered)], expected_seq=await store.head(cid), wake=None
    )
    await _append(store, cid, _outcome("a2", ToolOutcomeStatus.DENIED))
    child = await store.fork(
        cid,
        at_seq=await store.head(cid),
        key=SessionKey("support", "acme", "fork"),
        new_conversation_id="conv-2",
        created_at=T0,
    )
    await _append(store, child.id, _outcome("c3", ToolOutcomeStatus.DENIED))
    await _append(store, child.id, _outcome("a3", ToolOutcomeStatus.DENIED))
    await _append(store, child.id, _request(child.id, 18, "c4"), *_ask(child.id, 20, "a4"))
    gates = await store.list_gates(limit=100)
    approval, input_ = GateKind.APPROVAL, GateKind.INPUT
    assert [(g.approval_id, g.kind, g.status) for g in gates] == [
        ("conv-1.2", approval, GateStatus.CLOSED),
        ("conv-1.4", approval, GateStatus.DECIDED),
        ("conv-1.7", approval, GateStatus.PENDING),
        ("conv-1.9", input_, GateStatus.DECIDED),
        ("conv-1.11", input_, GateStatus.CLOSED),
        ("conv-1.13", input_, GateStatus.PENDING),
        ("conv-2.18", approval, GateStatus.PENDING),
        ("conv-2.20", input_, GateStatus.PENDING),
    ]
    assert (gates[3].answer, gates[3].approver, gates[5].prompt) == ({"v": 1}, "bob", "a3?")
    return gates


async def test_the_sqlite_v8_migration_backfills_the_gates(tmp_path: Path) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    async with await SqliteStore.open(new) as store:
        written = await _write(store)
        path = store.path
    sqlite_at(
        7, path, old, ("conversations", "records", "snapshots")
    )  # the file as v7 left it: logs, no gates
    async with await SqliteStore.open(old) as store:
        assert await store.list_gates(limit=100) == written
        assert await store.list_gates(status=GateStatus.PENDING, tool="mail") == [
            written[2],
            written[6],
        ]
        assert await store.list_gates(kind=GateKind.INPUT) == written[3:6] + written[7:]


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
        assert await store.list_gates(status=GateStatus.PENDING, tool="mail") == [
            written[2],
            written[6],
        ]
        assert await store.list_gates(kind=GateKind.INPUT) == written[3:6] + written[7:]


async def _approvals(store: CompleteStore) -> list[Gate]:
    """Approval gates in every status, a fork's among them: what a store held before kinds."""
    conversation, _ = await store.ensure_conversation(
        SessionKey("support", "acme"), conversation_id="conv-1", created_at=T0
    )
    cid = conversation.id
    await _append(store, cid, _request(cid, 2, "c1"), _outcome("c1", ToolOutcomeStatus.DENIED))
    await _append(store, cid, _request(cid, 4, "c2", "pay"), _request(cid, 5, "c3"))
    decided = ApprovalDecided(
        approval_id=f"{cid}.4", call_id="c2", decision="approve", approver="a"
    )
    await store.append_decision(
        cid, [RecordDraft(decided)], expected_seq=await store.head(cid), wake=None
    )
    child = await store.fork(
        cid,
        at_seq=await store.head(cid),
        key=SessionKey("support", "acme", "fork"),
        new_conversation_id="conv-2",
        created_at=T0,
    )
    await _append(store, child.id, _request(child.id, 7, "c4"))
    gates = await store.list_gates(limit=100)
    assert [(g.approval_id, g.kind) for g in gates] == [
        (f"conv-{n}", GateKind.APPROVAL) for n in ("1.2", "1.4", "1.5", "2.7")
    ]
    return gates


async def _kinds_work(store: CompleteStore, written: list[Gate]) -> None:
    """The migrated gates are approvals; the store then indexes inputs beside them."""
    assert await store.list_gates(limit=100) == written
    assert await store.list_gates(kind=GateKind.APPROVAL) == written
    assert await store.list_gates(kind=GateKind.INPUT) == []
    pending = [g for g in written if g.status is GateStatus.PENDING]
    assert await store.list_gates(kind=GateKind.APPROVAL, status=GateStatus.PENDING) == pending
    await _append(store, "conv-2", *_ask("conv-2", 9, "a1"))
    [asked] = await store.list_gates(kind=GateKind.INPUT)
    assert (asked.approval_id, asked.prompt, asked.answer_schema) == (
        "conv-2.9",
        "a1?",
        {"type": "string"},
    )
    answered = InputAnswered(input_id="conv-2.9", call_id="a1", value=None, responder="bob")
    await store.append_decision(
        "conv-2", [RecordDraft(answered)], expected_seq=await store.head("conv-2"), wake=None
    )
    [asked] = await store.list_gates(kind=GateKind.INPUT, status=GateStatus.DECIDED)
    assert (asked.decision, asked.answer, asked.approver) == ("answer", None, "bob")
    assert await store.list_gates(kind=GateKind.APPROVAL, limit=100) == written


async def test_the_sqlite_v12_migration_keeps_the_gates_as_approvals(tmp_path: Path) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    async with await SqliteStore.open(new) as store:
        written = await _approvals(store)
        path = store.path
    sqlite_at(
        11, path, old, ("conversations", "records", "snapshots", "gates")
    )  # the file as v11 left it
    async with await SqliteStore.open(old) as store:
        await _kinds_work(store, written)


@pytest.mark.postgres
async def test_the_postgres_v8_migration_keeps_the_gates_as_approvals() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        written = await _approvals(store)
    await postgres_at(
        7, written_schema, old, ("conversations", "records", "gates"), MIGRATIONS
    )  # the schema as v7 left it
    async with await PostgresStore.open(store_url(old)) as store:
        await _kinds_work(store, written)
