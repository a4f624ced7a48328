"""The PostgreSQL schema, as numbered migrations applied under an advisory lock.

Invariants live in constraints where PostgreSQL can hold them: one record per
``(conversation, seq)``, one settlement record per submission in a log, one submission per
dispatch id of a session, and only the known statuses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from psycopg import AsyncConnection, sql
from psycopg.rows import TupleRow

from tether.errors import UnsupportedSchema
from tether.store.postgres._children import WAKE_PARENT_FUNCTION
from tether.store.postgres._gates import backfill as backfill_gates
from tether.store.postgres._sessions import backfill as backfill_sessions
from tether.store.postgres._text import backfill_text

__all__ = ("BACKFILLS", "MIGRATIONS", "SCHEMA_VERSION", "migrate")

MIGRATIONS: Final = (
    # v1
    """
    CREATE TABLE tether_schema (
        singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
        version   INTEGER NOT NULL
    );
    CREATE TABLE conversations (
        id          TEXT PRIMARY KEY,
        agent       TEXT NOT NULL,
        instance    TEXT NOT NULL,
        session     TEXT NOT NULL,
        created_at  TIMESTAMPTZ NOT NULL,
        parent      BYTEA,
        fence       BIGINT NOT NULL DEFAULT 0,
        -- The head is kept on the row whose lock serializes appends: a reader following
        -- seq order can never see a later record commit before an earlier one.
        head        BIGINT NOT NULL DEFAULT 0,
        head_hash   BYTEA NOT NULL DEFAULT '',
        UNIQUE (agent, instance, session)
    );
    CREATE TABLE records (
        conversation_id TEXT NOT NULL REFERENCES conversations (id),
        seq             BIGINT NOT NULL CHECK (seq > 0),
        kind            TEXT NOT NULL,
        body            BYTEA NOT NULL,
        prev_hash       BYTEA NOT NULL,  -- SHA-256 digests as their 32 raw bytes
        hash            BYTEA NOT NULL,
        submission_id   TEXT,  -- set on submission_settled records only
        PRIMARY KEY (conversation_id, seq)
    );
    CREATE UNIQUE INDEX records_one_settlement ON records (conversation_id, submission_id)
        WHERE kind = 'submission_settled';
    CREATE TABLE submissions (
        position            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id                  TEXT NOT NULL UNIQUE,
        agent               TEXT NOT NULL,
        instance            TEXT NOT NULL,
        session             TEXT NOT NULL,
        dispatch_id         TEXT NOT NULL,
        conversation_id     TEXT NOT NULL REFERENCES conversations (id),
        status              TEXT NOT NULL CHECK (
            status IN ('queued', 'running', 'waiting', 'terminalizing', 'settled')
        ),
        input               BYTEA NOT NULL,
        created_at          TIMESTAMPTZ NOT NULL,
        attempt_count       INTEGER NOT NULL DEFAULT 0,
        attempt_id          TEXT,
        owner_id            TEXT,
        lease_expires_at    TIMESTAMPTZ,
        fence               BIGINT NOT NULL DEFAULT 0,
        last_error          TEXT,
        wait_reason         TEXT,
        cancel_requested_at TIMESTAMPTZ,
        settlement          BYTEA,
        settled_at          TIMESTAMPTZ,
        trace               BYTEA,
        UNIQUE (agent, instance, session, dispatch_id),
        CHECK ((status = 'settled') = (settled_at IS NOT NULL)),
        CHECK (status NOT IN ('terminalizing', 'settled') OR settlement IS NOT NULL),
        CHECK ((status = 'running') = (attempt_id IS NOT NULL AND lease_expires_at IS NOT NULL)
               OR status = 'terminalizing')
    );
    CREATE INDEX submissions_open ON submissions (conversation_id, position)
        WHERE status <> 'settled';
    CREATE INDEX submissions_queued ON submissions (position) WHERE status = 'queued';
    CREATE INDEX submissions_leased ON submissions (lease_expires_at) WHERE status = 'running';
    CREATE TABLE attempts (
        submission_id TEXT NOT NULL REFERENCES submissions (id),
        number        INTEGER NOT NULL,
        id            TEXT NOT NULL,
        owner_id      TEXT NOT NULL,
        fence         BIGINT NOT NULL,
        started_at    TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (submission_id, number)
    );
    CREATE TABLE attachments (
        digest     TEXT PRIMARY KEY,
        media_type TEXT NOT NULL,
        size       BIGINT NOT NULL,
        data       BYTEA NOT NULL
    );
    INSERT INTO tether_schema (version) VALUES (1);
    """,
    # v2: one snapshot per conversation, a cache a reader takes a long log in from
    """
    CREATE TABLE snapshots (
        conversation_id TEXT PRIMARY KEY REFERENCES conversations (id),
        seq             BIGINT NOT NULL,
        body            BYTEA NOT NULL
    );
    """,
    # v3: a one-row table ``ping`` writes to (the conversation row's head and head_hash,
    # the chain's anchor, have been there since v1); the workers that hold a liveness lock
    """
    CREATE TABLE heartbeat (
        singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
        at        TIMESTAMPTZ NOT NULL
    );
    CREATE TABLE owners (
        id         TEXT PRIMARY KEY,
        started_at TIMESTAMPTZ NOT NULL
    );
    """,
    # v4: every query the engine runs per request is served by an index: submissions by
    # status (reconciliation, the lease sweep, the approvals inbox) and by conversation,
    # settled ones included (steer, abort, reading a session)
    """
    CREATE INDEX submissions_by_status ON submissions (status, position);
    CREATE INDEX submissions_by_conversation ON submissions (conversation_id, position);
    """,
    # v5: the approval gates, an index derived from the logs in the transaction of the
    # records that open, decide or close them (``_gates``; the migration backfills it). One
    # listing index per combination of the optional filters (agent, instance, tool), each led
    # by the status and ending with the listing order; conversation ids sort bytewise
    # (COLLATE "C"), as on every backend; and the open gates a decision looks up.
    """
    CREATE TABLE gates (
        conversation_id TEXT COLLATE "C" NOT NULL REFERENCES conversations (id),
        seq             BIGINT NOT NULL CHECK (seq > 0),
        approval_id     TEXT NOT NULL,
        agent           TEXT NOT NULL,
        instance        TEXT NOT NULL,
        session         TEXT NOT NULL,
        submission_id   TEXT,
        execution_id    TEXT,
        call_id         TEXT NOT NULL,
        tool            TEXT NOT NULL,
        args            BYTEA NOT NULL,
        args_digest     TEXT NOT NULL,
        requested_at    TIMESTAMPTZ NOT NULL,
        status          TEXT NOT NULL CHECK (status IN ('pending', 'decided', 'closed')),
        decision        TEXT CHECK (decision IN ('approve', 'reject', 'edit')),
        edited_args     BYTEA,
        reason          TEXT,
        approver        TEXT,
        decided_at      TIMESTAMPTZ,
        closed_at       TIMESTAMPTZ,
        PRIMARY KEY (conversation_id, seq),
        CHECK ((status = 'decided') = (decision IS NOT NULL AND approver IS NOT NULL
                                       AND decided_at IS NOT NULL)),
        CHECK ((status = 'closed') = (closed_at IS NOT NULL))
    );
    CREATE INDEX gates_open ON gates (conversation_id) WHERE status = 'pending';
    CREATE INDEX gates_by_status ON gates (status, requested_at, conversation_id, seq);
    CREATE INDEX gates_by_status_agent
        ON gates (status, agent, requested_at, conversation_id, seq);
    CREATE INDEX gates_by_status_instance
        ON gates (status, instance, requested_at, conversation_id, seq);
    CREATE INDEX gates_by_status_tool
        ON gates (status, tool, requested_at, conversation_id, seq);
    CREATE INDEX gates_by_status_agent_instance
        ON gates (status, agent, instance, requested_at, conversation_id, seq);
    CREATE INDEX gates_by_status_agent_tool
        ON gates (status, agent, tool, requested_at, conversation_id, seq);
    CREATE INDEX gates_by_status_instance_tool
        ON gates (status, instance, tool, requested_at, conversation_id, seq);
    CREATE INDEX gates_by_status_agent_instance_tool
        ON gates (status, agent, instance, tool, requested_at, conversation_id, seq);
    """,
    # v6: subagents. A child submission keeps its parent's submission id, the task call it
    # answers and its depth; a park may carry a deadline. The children of a submission in
    # admission order (``list_children``, and the check that wakes a parent when its last
    # child settles) and the waits with a deadline (``list_expired_waits``), both partial, so
    # a root submission, or a wait without one, costs them nothing; and the wake itself
    # (``_children``), called by every statement that settles a child. Idempotent, so that a
    # schema whose version was set back (a test re-running an earlier step) can run it again.
    """
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS parent_submission_id TEXT;
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS parent_call_id TEXT;
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS depth INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS wait_until TIMESTAMPTZ;
    CREATE INDEX IF NOT EXISTS submissions_children
        ON submissions (parent_submission_id, position) WHERE parent_submission_id IS NOT NULL;
    CREATE INDEX IF NOT EXISTS submissions_wait_deadlines ON submissions (wait_until)
        WHERE status = 'waiting' AND wait_until IS NOT NULL;
    """
    + WAKE_PARENT_FUNCTION,
    # v7: sessions (issue 22). A conversation's last activity (its last record's time) and
    # the bytes of its records, kept in the update of its row that every append makes; the
    # index of newest activity first (then ids, bytewise), one per filter (none, the agent,
    # the agent and instance). The attachments each conversation's records reference, one
    # row per conversation and digest, written only with records that carry some: what an
    # erase checks before it drops an attachment. The durable schedules, oldest first. The
    # backfill (``_sessions``) derives the times, the bytes and the references from the
    # logs already stored; every statement is idempotent, like v6's.
    """
    ALTER TABLE conversations ADD COLUMN IF NOT EXISTS last_activity_at TIMESTAMPTZ;
    ALTER TABLE conversations ADD COLUMN IF NOT EXISTS bytes BIGINT NOT NULL DEFAULT 0;
    UPDATE conversations SET last_activity_at = created_at WHERE last_activity_at IS NULL;
    ALTER TABLE conversations ALTER COLUMN last_activity_at SET NOT NULL;
    CREATE INDEX IF NOT EXISTS conversations_by_activity
        ON conversations (last_activity_at DESC, id COLLATE "C");
    CREATE INDEX IF NOT EXISTS conversations_by_agent_activity
        ON conversations (agent, last_activity_at DESC, id COLLATE "C");
    CREATE INDEX IF NOT EXISTS conversations_by_agent_instance_activity
        ON conversations (agent, instance, last_activity_at DESC, id COLLATE "C");
    CREATE TABLE IF NOT EXISTS attachment_refs (
        conversation_id TEXT NOT NULL REFERENCES conversations (id),
        digest          TEXT NOT NULL,
        PRIMARY KEY (conversation_id, digest)
    );
    CREATE INDEX IF NOT EXISTS attachment_refs_by_digest ON attachment_refs (digest);
    CREATE TABLE IF NOT EXISTS schedules (
        id          TEXT COLLATE "C" PRIMARY KEY,
        definition  BYTEA NOT NULL,
        created_at  TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX IF NOT EXISTS schedules_by_age ON schedules (created_at, id);
    """,
    # v8: input gates (``Turn.ask``: a human gives a value), beside approvals in the gates
    # table: each gate's kind (every gate before v8 is an approval), an input's prompt and
    # answer schema, and its answer (NULL until answered; decision 'answer'). The listing
    # indexes are rebuilt led by the status and the kind, so that a listing of one kind reads
    # only its own rows (the pending inputs are an index range, not a filter over every
    # approval); a listing of both kinds reads a page of each and merges them. Nothing to
    # backfill: no v7 log holds an input. Idempotent, like v6's.
    """
    ALTER TABLE gates ADD COLUMN IF NOT EXISTS kind TEXT NOT NULL DEFAULT 'approval'
        CHECK (kind IN ('approval', 'input'));
    ALTER TABLE gates ADD COLUMN IF NOT EXISTS prompt TEXT;
    ALTER TABLE gates ADD COLUMN IF NOT EXISTS answer_schema BYTEA;
    ALTER TABLE gates ADD COLUMN IF NOT EXISTS answer BYTEA;
    ALTER TABLE gates DROP CONSTRAINT IF EXISTS gates_decision_check;
    ALTER TABLE gates ADD CONSTRAINT gates_decision_check
        CHECK (decision IN ('approve', 'reject', 'edit', 'answer'));
    ALTER TABLE gates DROP CONSTRAINT IF EXISTS gates_input_check;
    ALTER TABLE gates ADD CONSTRAINT gates_input_check CHECK (
        (kind = 'input') = (prompt IS NOT NULL)
        AND (decision IS NULL OR (kind = 'input') = (decision = 'answer'))
        AND (answer IS NOT NULL) = (decision IS NOT DISTINCT FROM 'answer')
    );
    DROP INDEX IF EXISTS gates_by_status;
    DROP INDEX IF EXISTS gates_by_status_agent;
    DROP INDEX IF EXISTS gates_by_status_instance;
    DROP INDEX IF EXISTS gates_by_status_tool;
    DROP INDEX IF EXISTS gates_by_status_agent_instance;
    DROP INDEX IF EXISTS gates_by_status_agent_tool;
    DROP INDEX IF EXISTS gates_by_status_instance_tool;
    DROP INDEX IF EXISTS gates_by_status_agent_instance_tool;
    CREATE INDEX IF NOT EXISTS gates_by_status_kind
        ON gates (status, kind, requested_at, conversation_id, seq);
    CREATE INDEX IF NOT EXISTS gates_by_status_kind_agent
        ON gates (status, kind, agent, requested_at, conversation_id, seq);
    CREATE INDEX IF NOT EXISTS gates_by_status_kind_instance
        ON gates (status, kind, instance, requested_at, conversation_id, seq);
    CREATE INDEX IF NOT EXISTS gates_by_status_kind_tool
        ON gates (status, kind, tool, requested_at, conversation_id, seq);
    CREATE INDEX IF NOT EXISTS gates_by_status_kind_agent_instance
        ON gates (status, kind, agent, instance, requested_at, conversation_id, seq);
    CREATE INDEX IF NOT EXISTS gates_by_status_kind_agent_tool
        ON gates (status, kind, agent, tool, requested_at, conversation_id, seq);
    CREATE INDEX IF NOT EXISTS gates_by_status_kind_instance_tool
        ON gates (status, kind, instance, tool, requested_at, conversation_id, seq);
    CREATE INDEX IF NOT EXISTS gates_by_status_kind_agent_instance_tool
        ON gates (status, kind, agent, instance, tool, requested_at, conversation_id, seq);
    """,
    # v9: agent versions (issue 38). The version a submission runs on, stamped by the claim
    # that starts it (NULL until a versioned claim takes it: every submission before v9); and
    # the workers, each with the versions it serves as canonical JSON
    # (``{"agent": ["v2", "v1"]}``) and since when. No index: a claim filters the queued
    # heads it reads anyway (``submissions_queued``), and the counts by version read the
    # unsettled submissions (``submissions_open``), an operator's question. Idempotent, like
    # v6's.
    """
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS version TEXT;
    CREATE TABLE IF NOT EXISTS workers (
        owner_id TEXT PRIMARY KEY,
        serves   BYTEA NOT NULL,
        since    TIMESTAMPTZ NOT NULL
    );
    """,
    # v10: API tokens (issue 39), each kept by the SHA-256 digest of its secret (hex), never
    # the secret; scopes and agents as canonical JSON arrays (agents NULL: every agent).
    # ``tokens_by_digest`` is the read of every authenticated request; a list filters the
    # few tokens an operator issued. Idempotent, like v6's.
    """
    CREATE TABLE IF NOT EXISTS tokens (
        id         TEXT PRIMARY KEY,
        digest     TEXT NOT NULL,
        subject    TEXT NOT NULL,
        tenant     TEXT,
        scopes     BYTEA NOT NULL,
        agents     BYTEA,
        display    TEXT,
        created_at TIMESTAMPTZ NOT NULL,
        expires_at TIMESTAMPTZ,
        revoked_at TIMESTAMPTZ
    );
    CREATE UNIQUE INDEX IF NOT EXISTS tokens_by_digest ON tokens (digest);
    """,
    # v11: tenants (issue 39). Each conversation belongs to a tenant (NULL: none), recorded by
    # what creates it (an admission, a fork, an import) and copied onto what is derived from
    # it (its submissions, at admission; its gates, as they open), so that a tenant's listing
    # reads one table; the schedules keep their own. Every listing filtered by a tenant has
    # indexes of its own, the unfiltered ones again led by the tenant, each partial (``WHERE
    # tenant IS NOT NULL``): a store without tenants keeps no entry in them. ``tenant = $1``
    # implies the condition, so the planner takes them. Every row before v11 is of no tenant:
    # nothing to backfill. Idempotent, like v6's.
    """
    ALTER TABLE conversations ADD COLUMN IF NOT EXISTS tenant TEXT;
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS tenant TEXT;
    ALTER TABLE gates ADD COLUMN IF NOT EXISTS tenant TEXT;
    ALTER TABLE schedules ADD COLUMN IF NOT EXISTS tenant TEXT;
    CREATE INDEX IF NOT EXISTS conversations_by_tenant_activity
        ON conversations (tenant, last_activity_at DESC, id COLLATE "C")
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS conversations_by_tenant_agent_activity
        ON conversations (tenant, agent, last_activity_at DESC, id COLLATE "C")
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS conversations_by_tenant_agent_instance_activity
        ON conversations (tenant, agent, instance, last_activity_at DESC, id COLLATE "C")
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS submissions_by_tenant
        ON submissions (tenant, position) WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS submissions_by_tenant_status
        ON submissions (tenant, status, position) WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS submissions_open_by_tenant
        ON submissions (tenant, position) WHERE tenant IS NOT NULL AND status <> 'settled';
    CREATE INDEX IF NOT EXISTS gates_by_tenant_status_kind
        ON gates (tenant, status, kind, requested_at, conversation_id, seq)
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS gates_by_tenant_status_kind_agent
        ON gates (tenant, status, kind, agent, requested_at, conversation_id, seq)
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS gates_by_tenant_status_kind_instance
        ON gates (tenant, status, kind, instance, requested_at, conversation_id, seq)
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS gates_by_tenant_status_kind_tool
        ON gates (tenant, status, kind, tool, requested_at, conversation_id, seq)
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS gates_by_tenant_status_kind_agent_instance
        ON gates (tenant, status, kind, agent, instance, requested_at, conversation_id, seq)
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS gates_by_tenant_status_kind_agent_tool
        ON gates (tenant, status, kind, agent, tool, requested_at, conversation_id, seq)
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS gates_by_tenant_status_kind_instance_tool
        ON gates (tenant, status, kind, instance, tool, requested_at, conversation_id, seq)
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS gates_by_tenant_status_kind_agent_instance_tool
        ON gates (tenant, status, kind, agent, instance, tool, requested_at, conversation_id, seq)
        WHERE tenant IS NOT NULL;
    CREATE INDEX IF NOT EXISTS schedules_by_tenant
        ON schedules (tenant, created_at, id) WHERE tenant IS NOT NULL;
    """,
    # v12: who decided each gate, as the server verified them (issue 39): the canonical JSON
    # of the decision's (or answer's) ``by``, written with the rest of the decision. No index:
    # it is read with the gate, never looked up. Every gate decided before v12 was decided by
    # no verified identity: nothing to backfill. Idempotent, like v6's.
    """
    ALTER TABLE gates ADD COLUMN IF NOT EXISTS decided_by BYTEA;
    """,
    # v13: who asked for each submission's cancel, as the server verified them (issue 39):
    # the canonical JSON of the abort's identity, written with the first cancel stamp. No
    # index: it is read with the submission. A cancel requested before v13 was asked by no
    # verified identity: nothing to backfill. Idempotent, like v6's.
    """
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS cancel_requested_by BYTEA;
    """,
    # v14: delayed dispatch (issue 41): a submission admitted with ``run_at`` is 'scheduled'
    # (its ``wait_until`` the due time) until the engine releases it to 'queued'. The status
    # check gains the value (dropped and re-added: idempotent), and the due ones are found by
    # a partial index as the timed waits are. Nothing to backfill: none was scheduled before.
    """
    ALTER TABLE submissions DROP CONSTRAINT IF EXISTS submissions_status_check;
    ALTER TABLE submissions ADD CONSTRAINT submissions_status_check CHECK (
        status IN ('scheduled', 'queued', 'running', 'waiting', 'terminalizing', 'settled')
    );
    CREATE INDEX IF NOT EXISTS submissions_scheduled ON submissions (wait_until)
        WHERE status = 'scheduled';
    """,
    # v15: budget gates (issue 41): a run whose budget ran out under the ``park`` policy
    # waits on a gate of kind ``budget`` (``budget_requested``), which the kind's check now
    # admits. Nothing to backfill: no v14 log holds a budget request. Idempotent: the
    # constraint is dropped by the name v7 gave it, then added again.
    """
    ALTER TABLE gates DROP CONSTRAINT IF EXISTS gates_kind_check;
    ALTER TABLE gates ADD CONSTRAINT gates_kind_check
        CHECK (kind IN ('approval', 'input', 'budget'));
    """,
    # v16: priorities (issue 41). Each submission's ``priority`` as admitted, and its
    # ``claim_rank`` (``_priority``): its admission time in microseconds since the epoch,
    # ``priority`` agings earlier, fixed at admission. A batch claim reads the queued heads by
    # rank, then position, from ``submissions_queued_by_rank`` (the queued rows only, as
    # ``submissions_queued``, which claims read before). An unsettled submission admitted
    # before v16 ranks at its admission (priority 0); a settled one keeps no rank. Idempotent,
    # like v6's.
    """
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS priority INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE submissions ADD COLUMN IF NOT EXISTS claim_rank BIGINT;
    UPDATE submissions
        SET claim_rank = (extract(epoch FROM created_at) * 1000000)::bigint
        WHERE status <> 'settled' AND claim_rank IS NULL;
    CREATE INDEX IF NOT EXISTS submissions_queued_by_rank ON submissions (claim_rank, position)
        WHERE status = 'queued';
    """,
    # v17: shared limits (issue 41, docs/limits.md): each limit key's expiring holds (a slot
    # in flight, a call in a rate's window, tokens spent in the last minute, a provider's
    # pause). The key compares as code points (``COLLATE "C"``), so a prefix is an index
    # range; ``limit_holds_by_owner`` serves a worker's renewal. Idempotent, like v6's.
    """
    CREATE TABLE IF NOT EXISTS limit_holds (
        key        TEXT COLLATE "C" NOT NULL,
        kind       TEXT NOT NULL,
        holder     TEXT NOT NULL,
        owner_id   TEXT NOT NULL,
        amount     BIGINT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX IF NOT EXISTS limit_holds_by_key ON limit_holds (key, kind, expires_at);
    CREATE INDEX IF NOT EXISTS limit_holds_by_owner ON limit_holds (owner_id, kind);
    """,
    # v18: tenant usage (issue 41, docs/budgets.md): what each tenant spent per UTC day,
    # moved by the checked append of every record that spends, in its transaction; and the
    # reservations of its model calls in flight, one row each, by the conversation that
    # makes the call. Idempotent, like v6's.
    """
    CREATE TABLE IF NOT EXISTS tenant_usage (
        tenant          TEXT NOT NULL,
        day             DATE NOT NULL,
        model_calls     BIGINT NOT NULL,
        tokens          BIGINT NOT NULL,
        cost_usd        DOUBLE PRECISION NOT NULL,
        tool_calls      BIGINT NOT NULL,
        max_call_tokens BIGINT NOT NULL,
        max_call_cost   DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, day)
    );
    CREATE TABLE IF NOT EXISTS usage_reservations (
        id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant     TEXT NOT NULL,
        holder     TEXT NOT NULL,
        owner_id   TEXT NOT NULL,
        tokens     BIGINT NOT NULL,
        cost_usd   DOUBLE PRECISION NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX IF NOT EXISTS usage_reservations_by_tenant
        ON usage_reservations (tenant, holder);
    CREATE INDEX IF NOT EXISTS usage_reservations_by_owner ON usage_reservations (owner_id);
    """,
    # v19: what a framework attached to an approval or input request (its deferral's metadata)
    "ALTER TABLE gates ADD COLUMN IF NOT EXISTS metadata BYTEA;",
    # v20: long-term memory (issue 43, docs/memory.md): one row per item, keyed by its
    # encoded namespace and key in code-point order (a prefix is a range of the key), its
    # keywords a tsvector of exactly the words the store found (GIN), its embedding packed
    # (float64), read by a semantic search's brute-force scan. Idempotent, like v6's.
    """
    CREATE TABLE IF NOT EXISTS memory_items (
        namespace  TEXT COLLATE "C" NOT NULL,
        key        TEXT COLLATE "C" NOT NULL,
        value      BYTEA NOT NULL,
        text       TEXT NOT NULL,
        words      TSVECTOR NOT NULL,
        embedding  BYTEA,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (namespace, key)
    );
    CREATE INDEX IF NOT EXISTS memory_items_words ON memory_items USING GIN (words);
    CREATE INDEX IF NOT EXISTS memory_items_by_update ON memory_items (updated_at);
    """,
    # v21: the outbound webhook outbox (issue 43, docs/how-to/webhooks.md): one row per
    # delivery (a subscription's ``held`` watch of its submission, or a delivery due or
    # done). ``webhook_deliveries_due`` serves a claim (only pending rows), ``..._by_order``
    # the listing, ``..._by_status`` the engine's pass over the held watches. Idempotent.
    """
    CREATE TABLE IF NOT EXISTS webhook_deliveries (
        id              TEXT COLLATE "C" PRIMARY KEY,
        url             TEXT NOT NULL,
        event           TEXT NOT NULL,
        events          TEXT NOT NULL,
        agent           TEXT NOT NULL,
        instance        TEXT NOT NULL,
        session         TEXT NOT NULL,
        submission_id   TEXT NOT NULL,
        tenant          TEXT,
        status          TEXT NOT NULL,
        body            BYTEA,
        attempts        INTEGER NOT NULL,
        next_attempt_at TIMESTAMPTZ,
        last_status     INTEGER,
        last_error      TEXT,
        created_at      TIMESTAMPTZ NOT NULL,
        delivered_at    TIMESTAMPTZ
    );
    CREATE INDEX IF NOT EXISTS webhook_deliveries_due
        ON webhook_deliveries (next_attempt_at, id) WHERE status = 'pending';
    CREATE INDEX IF NOT EXISTS webhook_deliveries_by_order
        ON webhook_deliveries (created_at, id);
    CREATE INDEX IF NOT EXISTS webhook_deliveries_by_status
        ON webhook_deliveries (status, created_at, id);
    CREATE INDEX IF NOT EXISTS webhook_deliveries_by_submission
        ON webhook_deliveries (submission_id);
    CREATE INDEX IF NOT EXISTS webhook_deliveries_by_session
        ON webhook_deliveries (agent, instance, session);
    """,
    # v22: session metadata and search (issue 43): a conversation's metadata, whole in its
    # row (canonical JSON, NULL for none) and one row per key in ``session_metadata``, whose
    # key (key, value's text form, conversation) serves a filter and whose second index an
    # erase; and the words of each of its messages as a ``tsvector`` in ``session_text``
    # under a GIN index (``_text``), backfilled from the logs already stored. Idempotent,
    # like v6's.
    """
    ALTER TABLE conversations ADD COLUMN IF NOT EXISTS metadata TEXT;
    CREATE TABLE IF NOT EXISTS session_metadata (
        key             TEXT NOT NULL,
        value           TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        PRIMARY KEY (key, value, conversation_id)
    );
    CREATE INDEX IF NOT EXISTS session_metadata_by_conversation
        ON session_metadata (conversation_id);
    CREATE TABLE IF NOT EXISTS session_text (
        conversation_id TEXT NOT NULL,
        seq             BIGINT NOT NULL,
        document        TSVECTOR NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    );
    CREATE INDEX IF NOT EXISTS session_text_words ON session_text USING GIN (document);
    """,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)
BACKFILLS: Final[Mapping[int, Callable[[AsyncConnection[TupleRow]], Awaitable[None]]]] = {
    5: backfill_gates,
    7: backfill_sessions,
    22: backfill_text,
}
"""What a step derives from the data already stored (by version). Each runs after the last
step, in version order: a backfill derives with today's code, which writes today's schema
(v5's gates backfill writes the columns v8 added)."""
_LOCK_KEY: Final = 0x7E7E_0001  # pg_advisory_xact_lock: one migrator at a time per database


async def migrate(conn: AsyncConnection[TupleRow], schema: str) -> None:
    """Create ``schema`` if needed and bring it to :data:`SCHEMA_VERSION` (idempotent, and
    safe when several processes start at once)."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        await conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        exists = await (
            await conn.execute(
                "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'tether_schema'",
                (schema,),
            )
        ).fetchone()
        version = 0
        if exists:
            row = await (await conn.execute("SELECT version FROM tether_schema")).fetchone()
            version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise UnsupportedSchema(version, SCHEMA_VERSION)
        for step in MIGRATIONS[version:]:
            await conn.execute(step)
        for number, backfill in sorted(BACKFILLS.items()):
            if number > version:
                await backfill(conn)
        if version < SCHEMA_VERSION:
            await conn.execute("UPDATE tether_schema SET version = %s", (SCHEMA_VERSION,))
