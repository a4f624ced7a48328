"""SQLite connections, pragmas and the versioned schema."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Literal

from tether.errors import StoreUnavailable, UnsupportedSchema
from tether.store._sqlite_gates import backfill as backfill_gates
from tether.store._sqlite_kinds import kind_code
from tether.store._sqlite_sessions import backfill as backfill_sessions
from tether.store._sqlite_text import backfill_text

__all__ = (
    "PAGE_SIZE",
    "SCHEMA_VERSION",
    "Synchronous",
    "connect",
    "migrate",
    "translate_errors",
)

SCHEMA_VERSION: Final = 25
PAGE_SIZE: Final = 8192
WAL_AUTOCHECKPOINT_PAGES: Final = 256
"""Checkpoint once the WAL holds this many pages (2 MiB of 8 KiB pages; SQLite's default is
1,000). A checkpoint lets the next commit restart the WAL from its beginning, and a commit
that overwrites space the WAL file already has is fsynced in about half the time of one
that grows the file, which must also journal the new size. The WAL is deleted when the
last connection closes, so every process starts growing it afresh: wrapping early makes
nearly every commit an overwrite. Steady-state throughput is the same either way."""
Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_SCHEMA_V1: Final = """
CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,
    agent       TEXT NOT NULL,
    instance    TEXT NOT NULL,
    session     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    parent      BLOB,
    fence       INTEGER NOT NULL DEFAULT 0,
    UNIQUE (agent, instance, session)
);
CREATE TABLE records (
    -- Rows are stored in append order and found through the unique index: a group commit
    -- then writes a few adjacent pages instead of one page per conversation.
    position        INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    body            BLOB NOT NULL,
    prev_hash       TEXT NOT NULL,
    hash            TEXT NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE TABLE submissions (
    position            INTEGER PRIMARY KEY AUTOINCREMENT,
    id                  TEXT NOT NULL UNIQUE,
    agent               TEXT NOT NULL,
    instance            TEXT NOT NULL,
    session             TEXT NOT NULL,
    dispatch_id         TEXT NOT NULL,
    conversation_id     TEXT NOT NULL,
    status              TEXT NOT NULL,
    input               BLOB NOT NULL,
    created_at          INTEGER NOT NULL,
    attempt_count       INTEGER NOT NULL DEFAULT 0,
    attempt_id          TEXT,
    owner_id            TEXT,
    lease_expires_at    INTEGER,
    fence               INTEGER NOT NULL DEFAULT 0,
    last_error          TEXT,
    wait_reason         TEXT,
    cancel_requested_at INTEGER,
    settlement          BLOB,
    settled_at          INTEGER,
    UNIQUE (agent, instance, session, dispatch_id)
);
CREATE INDEX submissions_open ON submissions (conversation_id, position) WHERE status != 'settled';
CREATE INDEX submissions_by_status ON submissions (status, position);
CREATE TABLE attempts (
    submission_id TEXT NOT NULL,
    number        INTEGER NOT NULL,
    id            TEXT NOT NULL,
    owner_id      TEXT NOT NULL,
    fence         INTEGER NOT NULL,
    started_at    INTEGER NOT NULL,
    PRIMARY KEY (submission_id, number)
) WITHOUT ROWID;
CREATE TABLE attachments (
    digest     TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    size       INTEGER NOT NULL,
    data       BLOB NOT NULL
) WITHOUT ROWID;
"""


# v3: hashes as their 32 raw bytes instead of 64 hex characters (SQLite cannot change a
# column's type, so the table is rebuilt; rows keep their positions).
_SCHEMA_V3: Final = """
CREATE TABLE records_v3 (
    position        INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    kind            TEXT NOT NULL,
    body            BLOB NOT NULL,
    prev_hash       BLOB NOT NULL,
    hash            BLOB NOT NULL,
    UNIQUE (conversation_id, seq)
);
INSERT INTO records_v3 (position, conversation_id, seq, kind, body, prev_hash, hash)
    SELECT position, conversation_id, seq, kind, body, tether_unhex(prev_hash),
           tether_unhex(hash)
    FROM records;
DROP TABLE records;
ALTER TABLE records_v3 RENAME TO records;
"""

# v4, smaller records: no prev_hash (it is the previous record's hash, read beside it: 33
# bytes a record stored twice); a known kind as its small code (one byte, not a name of 6
# to 27); the conversation as its number (conversations.number), not its id again in the
# row and in the index. Rebuilt, as in v3, for SQLite before 3.35. (A record whose
# conversation were missing would fail the migration on NOT NULL, not vanish from a join.)
_SCHEMA_V4: Final = """
CREATE TABLE conversations_v4 (
    number      INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    agent       TEXT NOT NULL,
    instance    TEXT NOT NULL,
    session     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    parent      BLOB,
    fence       INTEGER NOT NULL DEFAULT 0,
    UNIQUE (agent, instance, session)
);
INSERT INTO conversations_v4 (id, agent, instance, session, created_at, parent, fence)
    SELECT id, agent, instance, session, created_at, parent, fence FROM conversations
    ORDER BY rowid;
CREATE TABLE records_v4 (
    position     INTEGER PRIMARY KEY,
    conversation INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    kind         NOT NULL,
    body         BLOB NOT NULL,
    hash         BLOB NOT NULL,
    UNIQUE (conversation, seq)
);
INSERT INTO records_v4 (position, conversation, seq, kind, body, hash)
    SELECT r.position, c.number, r.seq, tether_kind_code(r.kind), r.body, r.hash
    FROM records r LEFT JOIN conversations_v4 c ON c.id = r.conversation_id;
DROP TABLE records;
DROP TABLE conversations;
ALTER TABLE conversations_v4 RENAME TO conversations;
ALTER TABLE records_v4 RENAME TO records;
"""

# v6: the chain's anchor on the conversation row, its head seq and hash, written in the same
# commit as every append (and backfilled here from each log's last record): ``verify`` then
# tells a log cut short from a whole one. And a one-row table ``ping`` writes to.
_SCHEMA_V6: Final = """
ALTER TABLE conversations ADD COLUMN head INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN head_hash BLOB NOT NULL DEFAULT x'';
UPDATE conversations SET
    head = COALESCE((SELECT MAX(seq) FROM records WHERE conversation = number), 0),
    head_hash = COALESCE((SELECT hash FROM records WHERE conversation = number
                          ORDER BY seq DESC LIMIT 1), x'');
CREATE TABLE heartbeat (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    at        INTEGER NOT NULL
);
"""

# v7: every query the engine runs per request is served by an index. A conversation's
# submissions, settled ones included, in admission order (steer, abort, ``tether`` reading
# a session); the open ones keep their partial index (``submissions_open``).
_SCHEMA_V7: Final = """
CREATE INDEX submissions_by_conversation ON submissions (conversation_id, position);
"""

# v8: the approval gates, an index derived from the logs in the commit of the records that
# open, decide or close them (see ``_sqlite_gates``; the migration backfills it from the
# logs). One listing index per combination of the optional filters (agent, instance, tool),
# each led by the status and ending with the listing order, so that every page is read in
# order from one index; and the open gates of a conversation, which a decision looks up.
_SCHEMA_V8: Final = """
CREATE TABLE gates (
    conversation_id TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    approval_id     TEXT NOT NULL,
    agent           TEXT NOT NULL,
    instance        TEXT NOT NULL,
    session         TEXT NOT NULL,
    submission_id   TEXT,
    execution_id    TEXT,
    call_id         TEXT NOT NULL,
    tool            TEXT NOT NULL,
    args            BLOB NOT NULL,
    args_digest     TEXT NOT NULL,
    requested_at    INTEGER NOT NULL,
    status          TEXT NOT NULL,
    decision        TEXT,
    edited_args     BLOB,
    reason          TEXT,
    approver        TEXT,
    decided_at      INTEGER,
    closed_at       INTEGER,
    PRIMARY KEY (conversation_id, seq)
);
CREATE INDEX gates_open ON gates (conversation_id) WHERE status = 'pending';
CREATE INDEX gates_by_status ON gates (status, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_agent ON gates (status, agent, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_instance
    ON gates (status, instance, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_tool ON gates (status, tool, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_agent_instance
    ON gates (status, agent, instance, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_agent_tool
    ON gates (status, agent, tool, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_instance_tool
    ON gates (status, instance, tool, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_agent_instance_tool
    ON gates (status, agent, instance, tool, requested_at, conversation_id, seq);
"""

# v9: subagents. A child submission keeps its parent's submission id, the task call it
# answers and its depth; a park may carry a deadline. The children of a submission in
# admission order (``list_children``, and the check that wakes a parent when its last child
# settles), and the waits with a deadline, by deadline (``list_expired_waits``): both partial,
# so a root submission, or a wait without one, costs them nothing.
_SCHEMA_V9: Final = """
ALTER TABLE submissions ADD COLUMN parent_submission_id TEXT;
ALTER TABLE submissions ADD COLUMN parent_call_id TEXT;
ALTER TABLE submissions ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
ALTER TABLE submissions ADD COLUMN wait_until INTEGER;
CREATE INDEX submissions_children ON submissions (parent_submission_id, position)
    WHERE parent_submission_id IS NOT NULL;
CREATE INDEX submissions_wait_deadlines ON submissions (wait_until)
    WHERE status = 'waiting' AND wait_until IS NOT NULL;
"""

# v10: the sessions index, erasure and schedules. Each conversation row keeps its last
# activity (the time of its last record, in microseconds) and the canonical bytes of its
# records beside its head, all three moved by the UPDATE every append already runs (see
# ``_sqlite_append``); one index per filter of ``list_sessions`` (none, agent, agent and
# instance), each ending with the listing order, so that every page is read in order from
# one index. The attachments each conversation's records reference, one row per
# (digest, conversation), written only for records that carry attachments: what an erase
# checks before it removes an attachment. And the durable schedules. The backfill derives
# the activity and the references from the logs; the bytes are summed here.
_SCHEMA_V10: Final = """
ALTER TABLE conversations ADD COLUMN last_activity INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
UPDATE conversations SET last_activity = created_at,
    bytes = COALESCE((SELECT SUM(length(CAST(body AS BLOB))) FROM records
                      WHERE conversation = number), 0);
CREATE INDEX conversations_by_activity ON conversations (last_activity DESC, id);
CREATE INDEX conversations_by_agent_activity ON conversations (agent, last_activity DESC, id);
CREATE INDEX conversations_by_instance_activity
    ON conversations (agent, instance, last_activity DESC, id);
CREATE TABLE attachment_refs (
    digest          TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    PRIMARY KEY (digest, conversation_id)
) WITHOUT ROWID;
CREATE INDEX attachment_refs_by_conversation ON attachment_refs (conversation_id);
CREATE TABLE schedules (
    id         TEXT PRIMARY KEY,
    definition BLOB NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX schedules_by_age ON schedules (created_at, id);
"""

# v11: retention truncates a log's head (``_sqlite_truncate``): the log then starts at its
# ``log_truncated`` record, which keeps the place and both hashes of the last record removed.
# A record's prevHash is not stored (v4: it is the hash of the row before it), and this one's
# is the hash of a record that is gone: the conversation row keeps it (NULL for a log that
# starts at seq 1, whose first prevHash is empty). Nothing to backfill: no v10 log is
# truncated. (The record kind gets its one-byte code, 21, in ``_sqlite_kinds``.)
_SCHEMA_V11: Final = """
ALTER TABLE conversations ADD COLUMN first_prev_hash BLOB;
"""

# v12: input gates (``Turn.ask``: a human gives a value), beside approvals in the gates
# table: each gate's kind (every gate before v12 is an approval), an input's prompt and
# answer schema, and its answer (canonical JSON; NULL until answered). The listing indexes
# are rebuilt led by the status and the kind, so that a listing of one kind reads only its
# own rows (the pending inputs are an index range, not a filter over every approval); a
# listing of both kinds reads a page of each and merges them, as one of every status does.
# Nothing to backfill: no v11 log holds an input (the record kinds get their codes, 22 and
# 23, in ``_sqlite_kinds``).
_SCHEMA_V12: Final = """
ALTER TABLE gates ADD COLUMN kind TEXT NOT NULL DEFAULT 'approval';
ALTER TABLE gates ADD COLUMN prompt TEXT;
ALTER TABLE gates ADD COLUMN answer_schema BLOB;
ALTER TABLE gates ADD COLUMN answer BLOB;
DROP INDEX gates_by_status;
DROP INDEX gates_by_status_agent;
DROP INDEX gates_by_status_instance;
DROP INDEX gates_by_status_tool;
DROP INDEX gates_by_status_agent_instance;
DROP INDEX gates_by_status_agent_tool;
DROP INDEX gates_by_status_instance_tool;
DROP INDEX gates_by_status_agent_instance_tool;
CREATE INDEX gates_by_status_kind ON gates (status, kind, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_kind_agent
    ON gates (status, kind, agent, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_kind_instance
    ON gates (status, kind, instance, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_kind_tool
    ON gates (status, kind, tool, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_kind_agent_instance
    ON gates (status, kind, agent, instance, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_kind_agent_tool
    ON gates (status, kind, agent, tool, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_kind_instance_tool
    ON gates (status, kind, instance, tool, requested_at, conversation_id, seq);
CREATE INDEX gates_by_status_kind_agent_instance_tool
    ON gates (status, kind, agent, instance, tool, requested_at, conversation_id, seq);
"""

# Each step takes the schema from version N to N + 1; a fresh file runs them all, so a
# migrated file and a fresh one cannot differ.
# v13: the sessions index orders by a floor of each conversation's last activity that trails
# it by at most ACTIVITY_LAG (``_sqlite_sessions``), so that an append rewrites the three
# index entries about once a second, not at every commit; ``last_activity`` stays exact.
_SCHEMA_V13: Final = """
ALTER TABLE conversations ADD COLUMN activity_floor INTEGER NOT NULL DEFAULT 0;
UPDATE conversations SET activity_floor = last_activity;
DROP INDEX conversations_by_activity;
DROP INDEX conversations_by_agent_activity;
DROP INDEX conversations_by_instance_activity;
CREATE INDEX conversations_by_activity ON conversations (activity_floor DESC, id);
CREATE INDEX conversations_by_agent_activity ON conversations (agent, activity_floor DESC, id);
CREATE INDEX conversations_by_instance_activity
    ON conversations (agent, instance, activity_floor DESC, id);
"""

# v14: agent versions (issue 38). The version a submission runs on, stamped by the claim that
# starts it (NULL until a versioned claim takes it: every submission before v14); and the
# workers, each with the versions it serves as canonical JSON (``{"agent": ["v2", "v1"]}``)
# and since when. No index: a claim filters the queued heads it reads anyway
# (``submissions_by_status``), and the counts by version read the unsettled submissions
# (``submissions_open``), an operator's question, not a request's.
_SCHEMA_V14: Final = """
ALTER TABLE submissions ADD COLUMN version TEXT;
CREATE TABLE workers (
    owner_id TEXT PRIMARY KEY,
    serves   BLOB NOT NULL,
    since    INTEGER NOT NULL
) WITHOUT ROWID;
"""

# v15: API tokens (issue 39), each kept by the SHA-256 digest of its secret (hex), never the
# secret; scopes and agents as canonical JSON arrays (agents NULL: every agent), times in
# microseconds. ``tokens_by_digest`` is the read of every authenticated request; a list
# filters the few tokens an operator issued.
_SCHEMA_V15: Final = """
CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    digest     TEXT NOT NULL,
    subject    TEXT NOT NULL,
    tenant     TEXT,
    scopes     BLOB NOT NULL,
    agents     BLOB,
    display    TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    revoked_at INTEGER
) WITHOUT ROWID;
CREATE UNIQUE INDEX tokens_by_digest ON tokens (digest);
"""

# v16: tenants (issue 39). Each conversation belongs to a tenant (NULL: none), recorded by
# what creates it (an admission, a fork, an import) and copied onto what is derived from it
# (its submissions, at admission; its gates, as they open), so that a tenant's listing reads
# one table; the schedules keep their own. Every listing filtered by a tenant has indexes of
# its own, the unfiltered ones again led by the tenant, each partial (``WHERE tenant IS NOT
# NULL``): a store without tenants keeps no entry in them, and pays nothing to keep them.
# A query ``tenant = ?`` implies the index's condition, so the planner takes them. Every row
# before v16 is of no tenant: nothing to backfill.
_SCHEMA_V16: Final = """
ALTER TABLE conversations ADD COLUMN tenant TEXT;
ALTER TABLE submissions ADD COLUMN tenant TEXT;
ALTER TABLE gates ADD COLUMN tenant TEXT;
ALTER TABLE schedules ADD COLUMN tenant TEXT;
CREATE INDEX conversations_by_tenant_activity
    ON conversations (tenant, activity_floor DESC, id) WHERE tenant IS NOT NULL;
CREATE INDEX conversations_by_tenant_agent_activity
    ON conversations (tenant, agent, activity_floor DESC, id) WHERE tenant IS NOT NULL;
CREATE INDEX conversations_by_tenant_instance_activity
    ON conversations (tenant, agent, instance, activity_floor DESC, id) WHERE tenant IS NOT NULL;
CREATE INDEX submissions_by_tenant ON submissions (tenant, position) WHERE tenant IS NOT NULL;
CREATE INDEX submissions_by_tenant_status
    ON submissions (tenant, status, position) WHERE tenant IS NOT NULL;
CREATE INDEX submissions_open_by_tenant
    ON submissions (tenant, position) WHERE tenant IS NOT NULL AND status != 'settled';
CREATE INDEX gates_by_tenant_status_kind
    ON gates (tenant, status, kind, requested_at, conversation_id, seq)
    WHERE tenant IS NOT NULL;
CREATE INDEX gates_by_tenant_status_kind_agent
    ON gates (tenant, status, kind, agent, requested_at, conversation_id, seq)
    WHERE tenant IS NOT NULL;
CREATE INDEX gates_by_tenant_status_kind_instance
    ON gates (tenant, status, kind, instance, requested_at, conversation_id, seq)
    WHERE tenant IS NOT NULL;
CREATE INDEX gates_by_tenant_status_kind_tool
    ON gates (tenant, status, kind, tool, requested_at, conversation_id, seq)
    WHERE tenant IS NOT NULL;
CREATE INDEX gates_by_tenant_status_kind_agent_instance
    ON gates (tenant, status, kind, agent, instance, requested_at, conversation_id, seq)
    WHERE tenant IS NOT NULL;
CREATE INDEX gates_by_tenant_status_kind_agent_tool
    ON gates (tenant, status, kind, agent, tool, requested_at, conversation_id, seq)
    WHERE tenant IS NOT NULL;
CREATE INDEX gates_by_tenant_status_kind_instance_tool
    ON gates (tenant, status, kind, instance, tool, requested_at, conversation_id, seq)
    WHERE tenant IS NOT NULL;
CREATE INDEX gates_by_tenant_status_kind_agent_instance_tool
    ON gates (tenant, status, kind, agent, instance, tool, requested_at, conversation_id, seq)
    WHERE tenant IS NOT NULL;
CREATE INDEX schedules_by_tenant ON schedules (tenant, created_at, id) WHERE tenant IS NOT NULL;
"""

# v17: who decided each gate, as the server verified them (issue 39): the canonical JSON of the
# decision's (or answer's) ``by``, written with the rest of the decision. No index: it is read
# with the gate, never looked up. Every gate decided before v17 was decided by no verified
# identity (decisions did not record one): nothing to backfill.
_SCHEMA_V17: Final = """
ALTER TABLE gates ADD COLUMN decided_by BLOB;
"""

# v18: who asked for each submission's cancel, as the server verified them (issue 39): the
# canonical JSON of the abort's identity, written with the first cancel stamp. No index: it
# is read with the submission. A cancel requested before v18 was asked by no verified
# identity: nothing to backfill.
_SCHEMA_V18: Final = """
ALTER TABLE submissions ADD COLUMN cancel_requested_by BLOB;
"""

# v19: priorities (issue 41). Each submission's ``priority`` as admitted, and its
# ``claim_rank`` (``_priority``): its admission time in microseconds, ``priority`` agings
# earlier, fixed at admission. Claims read the queued heads by rank, then position, from
# ``submissions_queued_by_rank`` (only queued rows: a claim moves its row out). An unsettled
# submission admitted before v19 ranks at its admission (priority 0); a settled one is never
# claimed again and keeps no rank.
_SCHEMA_V19: Final = """
ALTER TABLE submissions ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE submissions ADD COLUMN claim_rank INTEGER;
UPDATE submissions SET claim_rank = created_at WHERE status != 'settled';
CREATE INDEX submissions_queued_by_rank ON submissions (claim_rank, position)
    WHERE status = 'queued';
"""

# v20: shared limits (issue 41, docs/limits.md): each limit key's expiring holds (a slot in
# flight, a call in a rate's window, tokens spent in the last minute, a provider's pause),
# times in microseconds. ``limit_holds_by_key`` serves a grant's read of one key and the
# prefix scan of the keys at their limit; ``limit_holds_by_owner`` a worker's renewal.
_SCHEMA_V20: Final = """
CREATE TABLE limit_holds (
    key        TEXT NOT NULL,
    kind       TEXT NOT NULL,
    holder     TEXT NOT NULL,
    owner_id   TEXT NOT NULL,
    amount     INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX limit_holds_by_key ON limit_holds (key, kind, expires_at);
CREATE INDEX limit_holds_by_owner ON limit_holds (owner_id, kind);
"""

# v21: tenant usage (issue 41, docs/budgets.md): what each tenant spent per UTC day (its day
# as ``YYYY-MM-DD``), moved by the append of every record that spends, in its transaction;
# and the reservations of its model calls in flight (times in microseconds), one row each,
# by the conversation that makes the call. ``usage_reservations_by_tenant`` serves a
# reservation's read and the release of one by its conversation; ``..._by_owner`` a
# worker's renewal.
_SCHEMA_V21: Final = """
CREATE TABLE tenant_usage (
    tenant          TEXT NOT NULL,
    day             TEXT NOT NULL,
    model_calls     INTEGER NOT NULL,
    tokens          INTEGER NOT NULL,
    cost_usd        REAL NOT NULL,
    tool_calls      INTEGER NOT NULL,
    max_call_tokens INTEGER NOT NULL,
    max_call_cost   REAL NOT NULL,
    PRIMARY KEY (tenant, day)
) WITHOUT ROWID;
CREATE TABLE usage_reservations (
    tenant     TEXT NOT NULL,
    holder     TEXT NOT NULL,
    owner_id   TEXT NOT NULL,
    tokens     INTEGER NOT NULL,
    cost_usd   REAL NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX usage_reservations_by_tenant ON usage_reservations (tenant, holder);
CREATE INDEX usage_reservations_by_owner ON usage_reservations (owner_id);
"""
# v23: long-term memory (issue 43, docs/memory.md): one row per item, its namespace encoded so
# that a prefix is a range of ``memory_items_by_place``; its keywords in the FTS5 table
# ``memory_words`` under the item's id, kept by the store in each write's transaction; its
# embedding packed (float64), read by a semantic search's brute-force scan.
_SCHEMA_V23: Final = """
CREATE TABLE memory_items (
    id         INTEGER PRIMARY KEY,
    namespace  TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BLOB NOT NULL,
    text       TEXT NOT NULL,
    embedding  BLOB,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX memory_items_by_place ON memory_items (namespace, key);
CREATE INDEX memory_items_by_update ON memory_items (updated_at);
CREATE VIRTUAL TABLE memory_words USING fts5(words, tokenize = 'unicode61 remove_diacritics 0');
"""

# v24: the outbound webhook outbox (issue 43, docs/how-to/webhooks.md): one row per delivery
# (a subscription's ``held`` watch of its submission, or a delivery due or done), times in
# microseconds. ``webhook_deliveries_due`` serves a claim (only pending rows), ``..._by_order``
# the listing, ``..._by_status`` the engine's pass over the held watches, ``..._by_submission``
# a submission's deliveries, ``..._by_session`` an erase of a session's.
_SCHEMA_V24: Final = """
CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    url             TEXT NOT NULL,
    event           TEXT NOT NULL,
    events          TEXT NOT NULL,
    agent           TEXT NOT NULL,
    instance        TEXT NOT NULL,
    session         TEXT NOT NULL,
    submission_id   TEXT NOT NULL,
    tenant          TEXT,
    status          TEXT NOT NULL,
    body            BLOB,
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER
) WITHOUT ROWID;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at, id)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_order ON webhook_deliveries (created_at, id);
CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries (status, created_at, id);
CREATE INDEX webhook_deliveries_by_submission ON webhook_deliveries (submission_id);
CREATE INDEX webhook_deliveries_by_session ON webhook_deliveries (agent, instance, session);
"""

# v25: session metadata and search (issue 43): a conversation's metadata, whole in its row
# (canonical JSON, NULL for none) and one row per key in ``session_metadata``, whose key
# (key, value's text form, conversation) serves a filter and whose second index an erase;
# and the words of its messages in the FTS5 table ``session_text`` (``_sqlite_text``),
# backfilled from the logs already stored. A search asks for words, never phrases nor their
# positions: the index keeps neither (``detail = none``, ``columnsize = 0``), which makes it
# smaller and an append's insert cheaper.
_SCHEMA_V25: Final = """
ALTER TABLE conversations ADD COLUMN metadata TEXT;
CREATE TABLE session_metadata (
    key          TEXT NOT NULL,
    value        TEXT NOT NULL,
    conversation INTEGER NOT NULL,
    PRIMARY KEY (key, value, conversation)
) WITHOUT ROWID;
CREATE INDEX session_metadata_by_conversation ON session_metadata (conversation);
CREATE VIRTUAL TABLE session_text USING fts5 (
    text, tokenize = 'unicode61 remove_diacritics 0', detail = none, columnsize = 0
);
"""


_MIGRATIONS: Final = (
    _SCHEMA_V1,
    "ALTER TABLE submissions ADD COLUMN trace BLOB;",  # v2: the caller's W3C trace context
    _SCHEMA_V3,
    _SCHEMA_V4,
    # v5: one snapshot per conversation, a cache a reader takes a long log in from
    """CREATE TABLE snapshots (
        conversation INTEGER PRIMARY KEY,
        seq          INTEGER NOT NULL,
        body         BLOB NOT NULL
    );""",
    _SCHEMA_V6,
    _SCHEMA_V7,
    _SCHEMA_V8,
    _SCHEMA_V9,
    _SCHEMA_V10,
    _SCHEMA_V11,
    _SCHEMA_V12,
    _SCHEMA_V13,
    _SCHEMA_V14,
    _SCHEMA_V15,
    _SCHEMA_V16,
    _SCHEMA_V17,
    _SCHEMA_V18,
    _SCHEMA_V19,
    _SCHEMA_V20,
    _SCHEMA_V21,
    # v22: what a framework attached to an approval or input request (its deferral's metadata)
    "ALTER TABLE gates ADD COLUMN metadata BLOB;",
    _SCHEMA_V23,
    _SCHEMA_V24,
    _SCHEMA_V25,
)


_BACKFILLS: Final = {8: backfill_gates, 10: backfill_sessions, 25: backfill_text}
"""What a step derives from the data already stored (by version). Each runs after the last
step, in version order: a backfill derives with today's code, which writes today's schema
(v8's gates backfill writes the columns v12 added)."""


def _unhex(value: str | bytes) -> bytes:
    return bytes.fromhex(value) if isinstance(value, str) else value


@contextlib.contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """No raw ``sqlite3`` exception leaves the store: map it to :class:`StoreUnavailable`."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"sqlite {action} failed: {exc}") from exc


def connect(path: Path, *, synchronous: Synchronous, busy_timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit ``BEGIN IMMEDIATE``)."""
    conn = sqlite3.connect(
        path,
        isolation_level=None,
        check_same_thread=False,
        timeout=busy_timeout,
        cached_statements=256,
    )
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
    conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
    # Whatever the library's build default: freed cells and pages are zeroed as they are
    # freed, so an erase leaves no earlier copy (a row's old version left in its page by an
    # update, a freed page) behind. Appends free nothing; it costs them nothing measurable.
    conn.execute("PRAGMA secure_delete=ON")
    return conn


def _enable_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    # journal_mode ignores busy_timeout, so a concurrent opener may see SQLITE_BUSY: retry.
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
            continue
        if str(mode).lower() != "wal":
            raise StoreUnavailable(f"sqlite refused WAL journal mode (got {mode!r})")
        return


def migrate(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Enable WAL, then create or check the schema under a write lock."""
    # A new file's page size (an existing one keeps its own): records of a few hundred bytes
    # to a few KiB leave a tenth of each 4 KiB page unused at its end, half as much of 8 KiB.
    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
    _enable_wal(conn, busy_timeout)
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UnsupportedSchema(version, SCHEMA_VERSION)
        conn.create_function("tether_unhex", 1, _unhex, deterministic=True)
        conn.create_function("tether_kind_code", 1, kind_code, deterministic=True)
        for step in _MIGRATIONS[version:]:
            for statement in step.split(";"):
                if statement.strip():
                    conn.execute(statement)
        for number, backfill in sorted(_BACKFILLS.items()):
            if number > version:
                backfill(conn)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
