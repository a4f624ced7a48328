"""The migrations that keep who decided each gate (SQLite v17, PostgreSQL v12): a gate decided
before them was decided by no verified identity (``decided_by`` is ``None``, its approver and
decision as they were); a decision made after records who made it; a migrated SQLite file ends
with exactly the schema of a fresh one."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import JsonValue

from tether.messages import args_digest
from tether.records import Actor, ApprovalDecided, ApprovalRequested, RecordDraft
from tether.store import GateStatus, SqliteStore
from tether.store._sqlite_schema import _MIGRATIONS, SCHEMA_VERSION
from tether.store.postgres import PostgresStore
from tether.store.postgres._schema import MIGRATIONS
from tether.testing.storetest import CompleteStore, Fixtures

from ..postgres import fresh_schema, store_url
from .old_schemas import postgres_at, sqlite_at, sqlite_schema

_TABLES = ("conversations", "records", "submissions", "attempts", "gates")
_SQLITE_BEFORE = next(n for n, step in enumerate(_MIGRATIONS) if "decided_by" in step)
_POSTGRES_BEFORE = next(n for n, step in enumerate(MIGRATIONS) if "decided_by" in step)
_ANN = Actor(subject="ann@acme", tenant="acme", display="Ann")


def _request(cid: str, seq: int, call: str) -> RecordDraft:
    args: dict[str, JsonValue] = {"to": "bob"}
    requested = ApprovalRequested(
        approval_id=f"{cid}.{seq}",
        call_id=call,
        tool="mail",
        args=args,
        args_digest=args_digest(args),
    )
    return RecordDraft(requested, execution_id="e")


async def _written(store: CompleteStore) -> str:
    """A session with a gate decided and one pending, written before decisions kept who
    made them; its conversation's id."""
    fx = Fixtures(store)
    submission = await fx.claim(await fx.admit("old"))
    cid = submission.conversation_id
    drafts = [_request(cid, 2, "c1"), _request(cid, 3, "c2")]
    await store.append(cid, drafts, expected_seq=1, fence=submission.fence)
    decided = ApprovalDecided(
        approval_id=f"{cid}.2", call_id="c1", decision="reject", approver="ann", reason="no"
    )
    await store.append_decision(cid, [RecordDraft(decided)], expected_seq=3, wake=None)
    return cid


async def _deciders_work(store: CompleteStore, cid: str) -> None:
    [old] = await store.list_gates(status=GateStatus.DECIDED)
    assert (old.approval_id, old.decision, old.approver, old.reason) == (
        f"{cid}.2",
        "reject",
        "ann",
        "no",
    )
    assert old.decided_by is None
    decided = ApprovalDecided(
        approval_id=f"{cid}.3", call_id="c2", decision="approve", approver="Ann", by=_ANN
    )
    await store.append_decision(cid, [RecordDraft(decided)], expected_seq=4, wake=None)
    gates = await store.list_gates(status=GateStatus.DECIDED)
    assert [(g.approval_id, g.decided_by) for g in gates] == [
        (f"{cid}.2", None),
        (f"{cid}.3", _ANN),
    ]


async def test_the_sqlite_deciders_migration_leaves_every_decided_gate_by_no_one(
    tmp_path: Path,
) -> None:
    written, old, fresh = tmp_path / "written", tmp_path / "old", tmp_path / "fresh"
    async with await SqliteStore.open(written) as store:
        cid = await _written(store)
    sqlite_at(_SQLITE_BEFORE, written / "tether.db", old, _TABLES)
    async with await SqliteStore.open(old) as store:
        await _deciders_work(store, cid)
    async with await SqliteStore.open(fresh):
        pass
    assert sqlite_schema(old / "tether.db") == sqlite_schema(fresh / "tether.db")
    assert sqlite_schema(fresh / "tether.db")[-1] == ("user_version", str(SCHEMA_VERSION))


@pytest.mark.postgres
async def test_the_postgres_deciders_migration_leaves_every_decided_gate_by_no_one() -> None:
    written_schema, old = fresh_schema(), fresh_schema()
    async with await PostgresStore.open(store_url(written_schema)) as store:
        cid = await _written(store)
    await postgres_at(_POSTGRES_BEFORE, written_schema, old, _TABLES, MIGRATIONS)
    async with await PostgresStore.open(store_url(old)) as store:
        await _deciders_work(store, cid)
