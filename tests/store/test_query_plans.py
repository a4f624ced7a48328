"""Every query a served request runs is served by an index, on SQLite and on PostgreSQL.

A real server is driven through what users do per request (chat turns with and without
tools, steer, follow-up, abort, a stream, the approvals inbox and a decision, reads), while
every statement its store runs is captured. Each one is then explained: a full scan of a
table that grows with use (``SCAN submissions`` on SQLite, ``Seq Scan on submissions`` on
PostgreSQL with sequential scans disabled, so that any usable index is preferred) fails.
Start-up (migrations, reconciliation) runs before the capture and is not judged.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tether.demo import demo_agents
from tether.records import RecordDraft, UserMessage
from tether.store import (
    WAIT_FOR_CHILDREN,
    HeldBack,
    LimitAsk,
    MemoryStore,
    NewSubmission,
    ScheduleRow,
    SessionKey,
    SqliteStore,
    SubmissionStatus,
    TaskParent,
    WebhookDelivery,
    WebhookStatus,
)
from tether.store.postgres import PostgresStore
from tether.testing.storetest import CompleteStore, Fixtures

from ..engine.waits import until_emitted
from ..http.conftest import Server, serve
from ..postgres import POSTGRES_URL, fresh_schema, store_url

GROWING = (
    "records",
    "submissions",
    "conversations",
    "attempts",
    "snapshots",
    "attachments",
    "gates",
    "attachment_refs",
    "limit_holds",
    "memory_items",
    "webhook_deliveries",
    "session_metadata",
    "session_text",
)
# A claim reads the queued heads in claim order from ``submissions_queued_by_rank``, a
# partial index of the backlog alone (as PostgreSQL's ``submissions_queued`` below): SQLite
# calls reading it in order a SCAN, but it is not a scan of the history.
# The full text of messages is an FTS5 table: SQLite calls any read of it a SCAN of the
# virtual table, which is a read of its index when it has a constraint (a MATCH, a rowid
# range: the index string after the colon), a scan of the whole of it when it has none.
_SQLITE_SCAN = re.compile(
    rf"^SCAN ({'|'.join(GROWING)})\b(?! USING (?:COVERING )?INDEX submissions_queued_by_rank\b"
    r"| VIRTUAL TABLE INDEX \d+:\S)"
)
_EVERY_LINE = re.compile("")
_POSTGRES_SCAN = re.compile(rf"Seq Scan on ({'|'.join(GROWING)})\b")
_JUDGED = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b", re.IGNORECASE)
_SQLITE_SORT = re.compile(r"^USE TEMP B-TREE\b")
_POSTGRES_SORT = re.compile(r"\bSort\b")
_LISTED = "(?:conversations|submissions|schedules)"
_SQLITE_UNLED = re.compile(rf"^(?:SEARCH|SCAN) {_LISTED}\b(?! USING (?:COVERING )?INDEX \w*tenant)")
# PostgreSQL may read the queued ones of every tenant instead (``submissions_queued``, a
# partial index of the backlog alone): a cost it weighs, not a scan of the history.
_POSTGRES_UNLED = re.compile(
    rf"Scan (?:Backward )?(?:using|on) (?!\w*tenant|submissions_queued)\w+(?: on {_LISTED}\b|$)"
)


async def _served_requests(server: Server) -> None:
    """One of everything a client does per request, over HTTP."""
    client = server.client

    async def send(instance: str, body: str, **params: str) -> dict[str, Any]:
        response = await client.post(
            f"/agents/assistant/{instance}", json={"body": body}, params=params
        )
        assert response.status_code in (200, 202), response.text
        answer: dict[str, Any] = response.json()
        return answer

    await send("ann", "hello", wait="true")
    await send("ann", "hello again", wait="true")
    await send("bob", "what time is it?", wait="true")
    research = await send("cid", "research sqlite")
    steered = await client.post("/agents/assistant/cid/steer", json={"body": "focus"})
    assert steered.is_success, steered.text  # queued research counts as running
    followed = await client.post("/agents/assistant/cid/followup", json={"body": "and then?"})
    assert followed.is_success, followed.text
    await client.get(f"/submissions/{research['submissionId']}", params={"wait": "true"})
    await send("dan", "research aborts")
    await client.post("/agents/assistant/dan/abort", json={})
    async with client.stream("GET", "/agents/assistant/ann") as stream:
        await stream.aread()
    await client.get("/agents/assistant/ann/records", params={"after": "2", "limit": "5"})
    await client.get("/agents/assistant/ann/messages")
    parked = await send("eve", "email ops@example.com: hi")

    async def listed() -> list[dict[str, Any]]:
        approvals: list[dict[str, Any]] = (await client.get("/approvals")).json()["approvals"]
        return approvals

    approval = (await until_emitted(server.runtime, listed))[0]  # the run parks on its gate
    decided = await client.post(
        f"/approvals/{approval['approvalId']}", json={"decision": "approve", "approver": "me"}
    )
    assert decided.status_code == 200, decided.text
    await client.get(f"/submissions/{parked['submissionId']}", params={"wait": "true"})
    await client.get("/approvals")
    for params in ({"status": "all"}, {"status": "decided", "agent": "assistant"}):
        assert (await client.get("/approvals", params=params)).json()["approvals"]


# --- capture ------------------------------------------------------------------------


@dataclass
class Capture:
    """The statements a store ran, and how to find the full scans among them."""

    statements: list[Any] = field(default_factory=list)
    scans: Callable[[], list[str]] = list
    sorts: Callable[[], list[str]] = list
    """The plan lines that sort what a statement read (an ordered listing should not)."""
    unled: Callable[[], list[str]] = list
    """The plan lines that read a listing through an index the tenant does not lead (a
    tenant's listing should read only its rows)."""
    plans: Callable[[], list[str]] = list
    """Every plan line of the statements run."""


_connect = sqlite3.connect  # the real one: the judges' own connections are not captured


class _Recording(sqlite3.Connection):
    """Keeps each statement it executes with its parameters, so that a plan is asked of the
    statement as the store ran it: SQLite plans an inlined constant differently (it may seek
    on a constant where a bound parameter leaves it scanning)."""

    recorded: list[Any] | None = None

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if self.recorded is not None:
            self.recorded.append((sql, parameters))
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        rows = list(parameters)
        if self.recorded is not None and rows:
            self.recorded.append((sql, rows[0]))
        return super().executemany(sql, rows)


def _capture_sqlite(monkeypatch: pytest.MonkeyPatch, capture: Capture) -> None:
    def recording(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = _connect(*args, factory=_Recording, **kwargs)
        conn.recorded = capture.statements
        return conn

    monkeypatch.setattr(sqlite3, "connect", recording)


def _capture_postgres(monkeypatch: pytest.MonkeyPatch, capture: Capture) -> None:
    execute = psycopg.AsyncConnection.execute

    async def tracing(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        capture.statements.append((query, params))
        return await execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", tracing)


def sqlite_scans(
    path: Path, statements: list[tuple[str, Any]], bad: re.Pattern[str] = _SQLITE_SCAN
) -> list[str]:
    """The plan lines of ``statements`` (each with its parameters) that scan a growing table
    whole (or match ``bad``)."""
    found = []
    seen: set[tuple[str, str]] = set()
    conn = _connect(path)
    try:
        for statement, parameters in statements:
            if not _JUDGED.match(statement) or (statement, repr(parameters)) in seen:
                continue
            seen.add((statement, repr(parameters)))
            plan = conn.execute(f"EXPLAIN QUERY PLAN {statement}", parameters).fetchall()
            found += [f"{row[3]}  <-  {statement}" for row in plan if bad.match(row[3])]
    finally:
        conn.close()
    return found


def postgres_scans(
    url: str,
    schema: str,
    statements: list[tuple[Any, Any]],
    bad: re.Pattern[str] = _POSTGRES_SCAN,
) -> list[str]:
    """The plan lines of ``statements`` that scan a growing table whole (or match ``bad``),
    with sequential scans and sorts disabled: the planner then takes any index that can serve
    the query, in its order if one can (on tables this small it may otherwise read a wider
    index and sort the few rows; a query no index can order still shows its sort)."""
    found: list[str] = []
    seen: set[tuple[str, str]] = set()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")
        for query, params in statements:
            text = query if isinstance(query, str) else query.as_string(conn)
            if not _JUDGED.match(text) or (text, repr(params)) in seen:
                continue
            seen.add((text, repr(params)))
            with conn.transaction(force_rollback=True):
                plan = conn.execute(f"EXPLAIN {text}", params).fetchall()
            found += [f"{row[0].strip()}  <-  {text}" for row in plan if bad.search(row[0])]
    return found


@pytest.fixture
def capture() -> Capture:
    return Capture()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capture: Capture,
) -> AsyncIterator[CompleteStore]:
    """The server's store, every statement it runs captured."""
    opened: CompleteStore
    if request.param == "sqlite":
        _capture_sqlite(monkeypatch, capture)
        sqlite = await SqliteStore.open(tmp_path)
        capture.scans = lambda: sqlite_scans(sqlite.path, capture.statements)
        capture.sorts = lambda: sqlite_scans(sqlite.path, capture.statements, _SQLITE_SORT)
        capture.unled = lambda: sqlite_scans(sqlite.path, capture.statements, _SQLITE_UNLED)
        capture.plans = lambda: sqlite_scans(sqlite.path, capture.statements, _EVERY_LINE)
        opened = sqlite
    else:
        _capture_postgres(monkeypatch, capture)
        schema = fresh_schema()
        opened = await PostgresStore.open(store_url(schema))
        capture.scans = lambda: postgres_scans(POSTGRES_URL, schema, capture.statements)
        capture.sorts = lambda: postgres_scans(
            POSTGRES_URL, schema, capture.statements, _POSTGRES_SORT
        )
        capture.unled = lambda: postgres_scans(
            POSTGRES_URL, schema, capture.statements, _POSTGRES_UNLED
        )
        capture.plans = lambda: postgres_scans(
            POSTGRES_URL, schema, capture.statements, _EVERY_LINE
        )
    yield opened
    await opened.close()


async def test_every_query_of_a_served_request_is_served_by_an_index(
    serve: Callable[..., Any], capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_DEMO_RESEARCH_SECONDS", "0.3")
    server: Server = await serve(demo_agents())
    await server.runtime.ready()
    capture.statements.clear()  # start-up is not judged
    await _served_requests(server)
    judged = {str(s if isinstance(s, str) else s[0]) for s in capture.statements}
    assert len(judged) > 15  # the capture saw the workload
    assert capture.scans() == []


async def _subagent_steps(store: CompleteStore) -> None:
    """What the subagent steps run against a store: children admitted under a parent that
    parks for them (with a deadline), in a tree whose total is bounded (a grandchild counts
    too), listed, settled one way each, the expired waits swept."""
    fx = Fixtures(store)
    root = await fx.claim(await fx.admit("root"))
    children = [
        await fx.admit(
            f"task-{call}",
            dispatch_id=f"{root.id}:{call}",
            parent=TaskParent(root.id, root.conversation_id, 1, call, depth=1, max_total=10),
        )
        for call in ("a", "b")
    ]
    await fx.admit(
        "task-a1",
        parent=TaskParent(children[0].id, children[0].conversation_id, 1, "a1", 2, max_total=10),
    )
    parked = await store.park(
        root.id,
        attempt_id=str(root.attempt_id),
        reason=WAIT_FOR_CHILDREN,
        wait_until=fx.at(60),
    )
    assert parked.status is SubmissionStatus.WAITING
    assert [c.id for c in await store.list_children(root.id)] == [c.id for c in children]
    assert [s.id for s in await store.list_expired_waits(fx.at(61))] == [root.id]
    first = await fx.claim(children[0])
    await store.reserve_settlement(first.id, attempt_id=str(first.attempt_id), settlement={})
    await store.finalize_settlement(first.id, now=fx.at(1))
    await store.settle_absorbed(children[1].id, settlement={}, now=fx.at(2))
    assert (await store.get_submission(root.id)).status is SubmissionStatus.QUEUED


async def test_every_query_of_the_subagent_steps_is_served_by_an_index(
    store: CompleteStore, capture: Capture
) -> None:
    capture.statements.clear()  # opening (the migrations) is not judged
    await _subagent_steps(store)
    judged = {str(s if isinstance(s, str) else s[0]) for s in capture.statements}
    assert any("wait_until" in statement for statement in judged)
    assert sum("WITH RECURSIVE" in statement for statement in judged) == 2  # a tree's total
    assert capture.scans() == []


async def _versioned_claims(store: CompleteStore) -> None:
    """What a worker of some agent versions runs per claim: a batch that passes over heads it
    cannot serve, a claim by id, an admission that claims, and a parked run moved by CAS."""
    fx = Fixtures(store)
    serves = {"support": ["v2"]}
    pinned = await fx.claim(await fx.admit("pinned"), serves={"support": ["v1"]})
    await store.release(pinned.id, attempt_id=str(pinned.attempt_id))
    await fx.admit("foreign", agent="other")
    for n in range(3):
        await fx.admit(f"fresh-{n}")
    heads = await store.claim_runnable(
        attempt_ids=["att-a", "att-b"],
        owner_id="w",
        lease_expires_at=fx.at(60),
        now=fx.at(0),
        serves=serves,
    )
    assert [head.submission.version for head in heads] == ["v2", "v2"]
    assert (await fx.claim(await fx.admit("by-id"), serves=serves)).version == "v2"
    admitted = await store.admit_and_claim(
        fx.new("admitted"),
        attempt_id="att-c",
        owner_id="w",
        lease_expires_at=fx.at(60),
        now=fx.at(0),
        serves=serves,
    )
    assert admitted.submission.version == "v2"
    assert (await store.set_version(pinned.id, expected="v1", version="v2")).version == "v2"


async def test_every_query_of_a_versioned_claim_is_served_by_an_index(
    store: CompleteStore, capture: Capture
) -> None:
    capture.statements.clear()  # opening (the migrations) is not judged
    await _versioned_claims(store)
    judged = {str(s if isinstance(s, str) else s[0]) for s in capture.statements}
    assert any("version" in statement for statement in judged)
    assert capture.scans() == []


async def test_a_claim_reads_the_queued_heads_in_claim_order_without_a_sort(
    store: CompleteStore, capture: Capture
) -> None:
    """Claims take heads by rank (docs/priorities.md), read in that order from the index of
    the queued rows and stopped at the first they can take: no claim, with or without
    ``serves``, reads every queued head and sorts them (on SQLite, left to itself, the
    planner did: 50 times the instructions at 2,000 queued)."""
    fx = Fixtures(store)
    for n in range(60):
        await fx.admit(f"q{n}", priority=n % 7 - 3, seconds=n)
    capture.statements.clear()
    for serves in (None, {"support": ["v1"]}):
        heads = await store.claim_runnable(
            attempt_ids=[fx.id("att"), fx.id("att")],
            owner_id="owner-1",
            lease_expires_at=fx.at(3600),
            now=fx.at(60),
            serves=serves,
        )
        assert [h.submission.priority for h in heads] == [3, 3]
    await store.list_runnable(5)
    assert capture.statements
    assert capture.scans() == []
    if isinstance(store, SqliteStore):
        assert capture.sorts() == []
    # PostgreSQL's batch claim sorts the heads it took to number them (``row_number() OVER``,
    # the batch's few rows), which this check cannot tell from a sort of the backlog: what
    # its heads scan reads is measured by ``benchmarks/pg_claim.py`` (one row for one head).


async def _limits(store: CompleteStore) -> None:
    """Every limits statement the engine runs per claim and per model call, over holds of
    several keys and owners (issue 41)."""
    fx = Fixtures(store)
    for n in range(6):
        await fx.admit(f"s{n}", agent=("busy", "free")[n % 2], tenant=("t1", "t2")[n % 2])
    for n in range(8):
        ask = LimitAsk(
            f"agent:a{n % 3}",
            f"h{n}",
            f"w{n % 2}",
            fx.at(30),
            concurrency=5,
            rate=9,
            per_seconds=60,
            tokens_per_minute=10_000,
        )
        await store.acquire_limit(ask, now=fx.at(n))
        await store.spend_limit(f"agent:a{n % 3}", tokens=10, now=fx.at(n))
    await store.pause_limit("model:p", until=fx.at(20))
    await store.acquire_limit(LimitAsk("model:p", "h", "w0", fx.at(30)), now=fx.at(10))
    await store.limit_slots("agent:", now=fx.at(10))
    await store.renew_limits("w0", expires_at=fx.at(40))
    await store.release_limit("agent:a0", holder="h0")
    await store.release_owner_limits("w1")
    await store.claim_runnable(
        attempt_ids=["att-1", "att-2"],
        owner_id="w",
        lease_expires_at=fx.at(60),
        now=fx.at(0),
        held_back=HeldBack(agents=frozenset({"busy"}), tenants=frozenset({"t9"})),
    )


async def test_every_query_of_the_limits_is_served_by_an_index(
    store: CompleteStore, capture: Capture
) -> None:
    capture.statements.clear()  # opening (the migrations) is not judged
    await _limits(store)
    judged = {str(s if isinstance(s, str) else s[0]) for s in capture.statements}
    assert any("limit_holds" in statement for statement in judged)
    assert capture.scans() == []


async def _memory_steps(store: CompleteStore) -> None:
    """Every long-term memory statement a run makes on a user's namespace (issue 43 item 6),
    over items of several tenants and users."""
    fx = Fixtures(store)
    for n in range(12):
        namespace = (f"t{n % 3}", f"u{n % 2}", "bot")
        await store.put_memory(
            namespace, f"k{n}", {"n": n}, text=f"likes tea {n}", embedding=[1.0, n], now=fx.at(n)
        )
    user = ("t1", "u1")
    await store.get_memory((*user, "bot"), "k1")
    await store.list_memory(user, limit=5)
    await store.memory_namespaces(("t1",))
    await store.search_memory(user, text="tea")
    await store.search_memory(user, vector=[1.0, 0.0], scan=10)
    await store.search_memory(user, text="likes", vector=[1.0, 0.0])
    await store.delete_memory((*user, "bot"), "k1")
    await store.erase_memory(user)


async def test_every_query_of_the_memory_steps_is_served_by_an_index(
    store: CompleteStore, capture: Capture
) -> None:
    capture.statements.clear()  # opening (the migrations) is not judged
    await _memory_steps(store)
    judged = {str(s if isinstance(s, str) else s[0]) for s in capture.statements}
    assert any("memory_items" in statement for statement in judged)


async def _outbox(store: CompleteStore) -> None:
    """What a worker's webhook loop and the deliveries' routes run (issue 43)."""
    key = SessionKey("a", "x", "s")
    await store.put_webhook_deliveries(
        [
            WebhookDelivery(
                f"wh-{n}",
                "https://example.com/hook",
                "settled",
                key,
                f"sub-{n % 5}",
                Fixtures.at(n),
                status=(WebhookStatus.HELD, WebhookStatus.PENDING)[n % 2],
                events=("settled",),
                body=None if n % 2 == 0 else b"{}",
                next_attempt_at=None if n % 2 == 0 else Fixtures.at(n),
                tenant=("t1", None)[n % 2],
            )
            for n in range(40)
        ]
    )
    claimed = await store.claim_webhook_deliveries(
        Fixtures.at(50), lease_until=Fixtures.at(60), limit=3
    )
    await store.finish_webhook_attempt(
        claimed[0].id,
        attempt=1,
        status=WebhookStatus.DELIVERED,
        next_attempt_at=None,
        last_status=200,
        last_error=None,
        now=Fixtures.at(51),
    )
    await store.release_webhook_delivery("wh-0", body=b"{}", now=Fixtures.at(52))
    held = await store.list_webhook_deliveries(status=WebhookStatus.HELD, limit=5)
    await store.list_webhook_deliveries(status=WebhookStatus.HELD, limit=5, after=held[-1].id)
    await store.list_webhook_deliveries(submission_id="sub-1", status=WebhookStatus.HELD)
    await store.list_webhook_deliveries(limit=5, after="wh-7")
    await store.get_webhook_delivery("wh-3")
    await store.resend_webhook_delivery("wh-3", now=Fixtures.at(53))
    await store.forget_webhook_deliveries(SessionKey("a", "x", "other"))


async def test_every_query_of_the_webhook_outbox_is_served_by_an_index(
    store: CompleteStore, capture: Capture
) -> None:
    capture.statements.clear()  # opening (the migrations) is not judged
    await _outbox(store)
    judged = {str(s if isinstance(s, str) else s[0]) for s in capture.statements}
    assert any("webhook_deliveries" in statement for statement in judged)
    assert capture.scans() == []


async def _fill_sessions(store: CompleteStore) -> None:
    """Conversations of two agents and three instances, with attachments in some logs (one
    shared by two), so that the planner has rows to weigh."""
    shared = await store.put_attachment(b"shared", media_type="text/plain")
    for n in range(9):
        key = SessionKey(("a", "b")[n % 2], ("x", "y", "z")[n % 3], f"s{n}")
        tenant = "t1" if n % 3 == 0 else (None, "t2")[n % 2]
        new = NewSubmission(
            f"sub-{n}", key, f"conv-{n}", {"body": "hi"}, Fixtures.at(n), tenant=tenant
        )
        cid = (await store.admit(new)).submission.conversation_id
        own = await store.put_attachment(f"own {n}".encode(), media_type="text/plain")
        refs = (own, shared) if n % 3 == 0 else (own,)
        drafts = [
            RecordDraft(UserMessage(body=f"m{n}", attachments=refs)),
            RecordDraft(UserMessage(body="plain")),
        ]
        await store.append(cid, drafts, expected_seq=await store.head(cid), fence=0)


_FILTERS: tuple[dict[str, Any], ...] = ({}, {"agent": "a"}, {"agent": "a", "instance": "x"})


async def _list_every_filter(store: CompleteStore) -> None:
    for tenant in (None, "t1"):
        for filters in _FILTERS:
            first = await store.list_sessions(limit=2, tenant=tenant, **filters)
            await store.list_sessions(limit=2, after=first[-1].cursor, tenant=tenant, **filters)


async def _session_steps(store: CompleteStore) -> None:
    """Erasure (a log whose attachments are all its own, and one that shares one), an
    import, the schedules."""
    await _fill_sessions(store)
    await _list_every_filter(store)
    for cid in ("conv-1", "conv-0"):
        await store.erase_session(cid)
    async with MemoryStore() as source:
        conversation, _ = await source.ensure_conversation(
            SessionKey("a", "x", "imported"), conversation_id="conv-in", created_at=Fixtures.at(0)
        )
        await store.import_conversation(conversation, await source.read(conversation.id))
    await store.put_schedule(ScheduleRow("sched-1", {"every": 60}, Fixtures.at(0)))
    await store.put_schedule(ScheduleRow("sched-2", {"every": 60}, Fixtures.at(0), "t1"))
    await store.list_schedules()
    await store.list_schedules(tenant="t1")
    for status in (None, SubmissionStatus.QUEUED):
        for unsettled in (False, True):
            await store.list_submissions(status, unsettled=unsettled, tenant="t1")
    await store.list_submissions(conversation_id="conv-2", tenant="t1")
    await store.delete_schedule("sched-1")


async def test_every_query_of_the_session_steps_is_served_by_an_index(
    store: CompleteStore, capture: Capture
) -> None:
    capture.statements.clear()  # opening (the migrations) is not judged
    await _session_steps(store)
    judged = {str(s if isinstance(s, str) else s[0]) for s in capture.statements}
    assert any("attachment_refs" in statement for statement in judged)
    assert capture.scans() == []


async def test_every_page_of_the_sessions_index_is_an_ordered_index_read(
    store: CompleteStore, capture: Capture
) -> None:
    """No page of any filter, the first or the next, sorts what it read: each is a range of
    one index read in the listing order, as long as the page."""
    await _fill_sessions(store)
    capture.statements.clear()
    await _list_every_filter(store)
    assert capture.statements
    assert capture.scans() == []
    assert capture.sorts() == []


async def test_every_listing_of_a_tenant_reads_an_index_the_tenant_leads(
    store: CompleteStore, capture: Capture
) -> None:
    """A tenant's sessions (every filter, every page), submissions (every filter but a
    conversation, whose own index serves it) and schedules are each a range of an index led
    by the tenant: they read that tenant's rows, not every tenant's."""
    await _fill_sessions(store)
    await store.put_schedule(ScheduleRow("sched-1", {"every": 60}, Fixtures.at(0), "t1"))
    capture.statements.clear()
    for filters in _FILTERS:
        first = await store.list_sessions(limit=2, tenant="t1", **filters)
        await store.list_sessions(limit=2, after=first[-1].cursor, tenant="t1", **filters)
    for status in (None, SubmissionStatus.QUEUED):
        for unsettled in (False, True):
            await store.list_submissions(status, unsettled=unsettled, tenant="t1")
    await store.list_schedules(tenant="t1")
    listings = [
        (query, params)
        for query, params in capture.statements
        if "tenant = " in str(query) and "FROM conversations WHERE id" not in str(query)
    ]
    assert len(listings) >= 11
    capture.statements[:] = listings
    assert capture.unled() == []


def test_the_sqlite_check_catches_a_full_scan(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE TABLE submissions (status TEXT, conversation_id TEXT)")
    conn.close()
    query = "SELECT * FROM submissions WHERE ('queued' IS NULL OR status = 'queued')"
    assert len(sqlite_scans(tmp_path / "t.db", [(query, ())])) == 1


def test_the_sqlite_check_asks_with_the_parameters_bound(tmp_path: Path) -> None:
    """A range only an OR of two terms gives is a seek once its constants are inlined, and a
    scan of the whole index as the store runs it."""
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("CREATE TABLE conversations (floor INTEGER, id TEXT)")
    conn.execute("CREATE INDEX by_floor ON conversations (floor DESC, id)")
    conn.close()
    query = "SELECT id FROM conversations WHERE (floor < {} OR (floor = {} AND id > {})) "
    query += "ORDER BY floor DESC, id LIMIT 5"
    inlined = (query.format("7", "7", "'x'"), ())
    bound = (query.format("?", "?", "?"), (7, 7, "x"))
    assert [len(sqlite_scans(tmp_path / "t.db", [q])) for q in (inlined, bound)] == [0, 1]


def test_the_postgres_check_catches_a_full_scan() -> None:
    assert _POSTGRES_SCAN.search("  ->  Seq Scan on submissions  (cost=0.00..1.01 rows=1)")
    assert not _POSTGRES_SCAN.search("Index Scan using submissions_open on submissions")


__all__ = ("serve",)  # the server fixture, shared with the HTTP tests


async def _search_every_filter(store: CompleteStore) -> None:
    """Each search filter alone and together, of every tenant, a first page and the next."""
    searches: tuple[dict[str, Any], ...] = (
        {"metadata": {"customer": "acme"}},
        {"metadata": {"customer": "acme", "tier": "1"}},
        {"text": "plain"},
        {"text": "plain", "metadata": {"customer": "acme"}},
        {"text": "plain", "since": Fixtures.at(3)},
        {"text": "plain", "agent": "a"},
        {"text": "plain", "agent": "a", "instance": "x"},
    )
    for tenant in (None, "t1"):
        for search in searches:
            first = await store.list_sessions(limit=1, tenant=tenant, **search)
            assert first, (tenant, search)
            await store.list_sessions(limit=1, after=first[-1].cursor, tenant=tenant, **search)
    await store.list_sessions(limit=2, since=Fixtures.at(3))


async def test_every_search_of_the_sessions_is_served_by_the_search_indexes(
    store: CompleteStore, capture: Capture
) -> None:
    """Issue 43, item 5: a metadata filter reads ``session_metadata``'s key, a text search
    the messages' full-text index (FTS5, GIN), and neither scans the sessions table: its rows
    are read by the conversations the filters name. A patch and an erase are index-backed."""
    await _fill_sessions(store)
    for n in range(9):
        tier = n % 2
        await store.patch_session_metadata(f"conv-{n}", {"customer": "acme", "tier": tier})
    capture.statements.clear()
    await _search_every_filter(store)
    await store.patch_session_metadata("conv-3", {"tier": None, "vip": True})
    await store.erase_session("conv-0")
    assert capture.statements
    assert capture.scans() == []
    used = "\n".join(capture.plans())
    if isinstance(store, SqliteStore):
        assert "SEARCH session_metadata USING PRIMARY KEY (key=? AND value=?)" in used, used
        assert re.search(r"SCAN session_text VIRTUAL TABLE INDEX \d+:M", used), used
        assert "SEARCH conversations USING INTEGER PRIMARY KEY (rowid=?)" in used, used
    else:
        assert "session_metadata_pkey on session_metadata" in used, used
        assert "Bitmap Index Scan on session_text_words" in used, used
