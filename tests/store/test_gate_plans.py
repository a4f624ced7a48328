"""Every page of ``list_gates``, for every combination of filters and kinds, with and without
a cursor, is an index range read in listing order, on SQLite and on PostgreSQL: no statement scans
the gates table whole (``SCAN gates`` on SQLite; ``Seq Scan on gates`` on PostgreSQL with
sequential scans disabled), and none sorts what it read (``USE TEMP B-TREE``, ``Sort``), so a
page costs its own rows, not the history's; and a listing of one kind reads an index led by
the kind (the pending inputs are not a filter over every approval). The statements that keep
the index (a request, a decision, an answer, a closing outcome, a settlement closing a budget
gate) are served by an index too."""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from pydantic import JsonValue

from tether.messages import ToolOutcomeStatus, args_digest
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    BudgetRequested,
    InputAnswered,
    InputRequested,
    Payload,
    RecordDraft,
    SubmissionSettled,
    ToolOutcome,
)
from tether.store import GateKind, GateStatus, NewSubmission, SessionKey, SqliteStore, Store
from tether.store.postgres import PostgresStore
from tether.testing.storetest import CompleteStore, complete

from ..postgres import POSTGRES_URL, fresh_schema, store_url
from .test_query_plans import _JUDGED, Capture, _capture_postgres, _capture_sqlite

FILTERS = ("agent", "instance", "tool", "tenant")
_SQLITE_BAD = re.compile(r"^SCAN gates\b|USE TEMP B-TREE")
_POSTGRES_BAD = re.compile(r"Seq Scan on gates\b|\bSort\b")
_GATES = re.compile(r"\bgates\b")


async def _fill(store: CompleteStore) -> None:
    """A few gates of each kind in every status, of two tenants and of none, so the planner
    has rows to weigh."""
    for n in range(12):
        key = SessionKey(("a", "b")[n % 2], ("x", "y", "z")[n % 3], f"s{n}")
        tenant = (None, "t1", "t2")[n // 2 % 3]
        new = NewSubmission(f"sub-{n}", key, f"conv-{n}", {}, datetime.now(UTC), tenant=tenant)
        cid = (await store.admit(new)).submission.conversation_id
        args: dict[str, JsonValue] = {"n": n}
        tool = ("mail", "pay")[n % 2]
        requested: Payload = ApprovalRequested(
            approval_id=f"{cid}.2", call_id="c", tool=tool, args=args, args_digest=args_digest(args)
        )
        decided: Payload = ApprovalDecided(
            approval_id=f"{cid}.2", call_id="c", decision="approve", approver="ann"
        )
        if n >= 6:
            requested = InputRequested(
                input_id=f"{cid}.2", call_id="c", tool=tool, args=args, prompt="?"
            )
            decided = InputAnswered(input_id=f"{cid}.2", call_id="c", value=n, responder="ann")
        drafts = [RecordDraft(requested, execution_id="e")]
        if n % 3 == 1:
            drafts.append(RecordDraft(decided, execution_id="e"))
        elif n % 3 == 2:
            outcome = ToolOutcome(call_id="c", content="no", status=ToolOutcomeStatus.DENIED)
            drafts.append(RecordDraft(outcome, execution_id="e"))
        if n % 4 == 0:  # a budget gate, which its submission's settlement closes (n 0, 8)
            budget = BudgetRequested(
                gate_id=f"{cid}.9", limit="tokens", used=1, max=1, spent={}, budget={}
            )
            drafts.append(RecordDraft(budget, submission_id=f"sub-{n}"))
        if n % 8 == 0:
            settled = SubmissionSettled(status="succeeded")
            drafts.append(RecordDraft(settled, submission_id=f"sub-{n}"))
        for draft in drafts:  # one append each: every statement that keeps the index runs
            head = await store.head(cid)
            await store.append(cid, [draft], expected_seq=head, fence=0)


async def _list_every_combination(store: CompleteStore) -> None:
    for n in range(len(FILTERS) + 1):
        for names in itertools.combinations(FILTERS, n):
            filters = {
                name: {"agent": "a", "instance": "x", "tool": "mail", "tenant": "t1"}[name]
                for name in names
            }
            for status, kind in itertools.product((None, *GateStatus), (None, *GateKind)):
                [first, *_] = await store.list_gates(status=None, limit=1)
                await store.list_gates(status=status, kind=kind, limit=2, **filters)
                await store.list_gates(
                    status=status, kind=kind, limit=2, after=first.cursor, **filters
                )


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def planned(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[str, Capture, Store]]:
    """A store, every statement it runs captured, and where its plans are asked."""
    captured = Capture()
    store: CompleteStore
    if request.param == "sqlite":
        _capture_sqlite(monkeypatch, captured)
        store = await SqliteStore.open(tmp_path)
        yield "sqlite", captured, store
    else:
        _capture_postgres(monkeypatch, captured)
        schema = fresh_schema()
        store = await PostgresStore.open(store_url(schema))
        yield schema, captured, store
    await store.close()


def _sqlite_plans(path: Path, statements: list[tuple[str, Any]]) -> dict[str, list[str]]:
    conn = sqlite3.connect(path)
    try:
        return {
            f"{text}  {params!r}": [
                row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {text}", params)
            ]
            for text, params in statements
        }
    finally:
        conn.close()


def _postgres_plans(schema: str, statements: list[tuple[Any, Any]]) -> dict[str, list[str]]:
    plans: dict[str, list[str]] = {}
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("SET enable_seqscan = off")
        for query, params in statements:
            text = query if isinstance(query, str) else query.as_string(conn)
            with conn.transaction(force_rollback=True):
                rows = conn.execute(f"EXPLAIN {text}", params).fetchall()
            plans[f"{text}  {params!r}"] = [row[0] for row in rows]
    return plans


async def test_every_gate_listing_and_update_is_an_ordered_index_read(
    planned: tuple[str, Capture, Store],
) -> None:
    where, captured, opened = planned
    store = complete(opened)
    await _fill(store)
    await _list_every_combination(store)
    statements = [
        (q, p)
        for q, p in captured.statements
        if isinstance(q, str) and _GATES.search(q) and _JUDGED.match(q)
    ]
    if isinstance(store, SqliteStore):
        plans = _sqlite_plans(store.path, statements)
        bad = _SQLITE_BAD
    else:
        plans = _postgres_plans(where, statements)
        bad = _POSTGRES_BAD
    listings = [s for s in plans if s.lstrip().startswith("SELECT") and "FROM gates" in s]
    updates = [s for s in plans if s.lstrip().startswith(("UPDATE gates", "INSERT INTO gates"))]
    # Each combination of filters ran, with and without a cursor; every kind of change ran.
    assert len(listings) >= 2 * 2 ** len(FILTERS)
    assert {s.split()[0] for s in updates} == {"INSERT", "UPDATE"} and len(updates) >= 3
    assert any("kind = 'budget'" in s for s in updates)  # a settlement closing a budget gate
    # Every listing names its kind, so that its index range holds that kind's rows alone.
    assert all("kind = " in s for s in listings)
    # A tenant's listing reads an index the tenant leads: its rows alone, not every tenant's.
    tenants = [s for s in listings if "tenant = " in s]
    assert len(tenants) >= 2 * 2 ** (len(FILTERS) - 1)
    assert [s for s in tenants if not any("by_tenant" in line for line in plans[s])] == []
    found = [f"{line}  <-  {s}" for s, lines in plans.items() for line in lines if bad.search(line)]
    assert found == []


def test_the_checks_catch_a_scan_and_a_sort(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE TABLE gates (status TEXT, tool TEXT, requested_at INTEGER)")
    conn.execute("CREATE INDEX gates_by_status ON gates (status)")
    conn.close()
    plans = _sqlite_plans(
        tmp_path / "t.db",
        [
            ("SELECT * FROM gates WHERE tool = ?", ("x",)),
            ("SELECT * FROM gates WHERE status = ? ORDER BY requested_at", ("x",)),
        ],
    )
    assert [any(_SQLITE_BAD.search(line) for line in lines) for lines in plans.values()] == [
        True,
        True,
    ]
    assert _POSTGRES_BAD.search("  ->  Seq Scan on gates  (cost=0.00..1.01 rows=1)")
    assert _POSTGRES_BAD.search("Sort  (cost=8.17..8.18 rows=1 width=300)")
    assert not _POSTGRES_BAD.search("Index Scan using gates_by_status on gates")
