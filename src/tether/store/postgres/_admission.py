"""The SQL of the PostgreSQL store's admissions: a new session's in one statement, the
checked path (idempotent replays, conflicts, a racing admission of the same dispatch), and
an admission that claims at once.

A child submission (``NewSubmission.parent``) keeps its parent link and depth, and the
conversation it materializes links back to the task call in its ``conversation_created``
record (an existing conversation is left as it is). Every admission is a tenant's (a child's
parent's): the one statement admits only into a conversation of that tenant (or creates it
of that tenant), and leaves another tenant's to the checked path, which refuses it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tether._canonical import canonical_json
from tether._payloads import ConversationParent
from tether.errors import ClaimLost, ConversationNotFound, DispatchConflict
from tether.store._common import SUBMISSION_COLUMNS, record_time, seal_created
from tether.store._limits import ClaimSlots, LimitAsk
from tether.store._types import Admission, Conversation, NewSubmission
from tether.store._versions import VersionsServed
from tether.store.postgres._children import check_tree_total, lock_tree_root
from tether.store.postgres._limits import free_slots, give_back_slots, take_slots
from tether.store.postgres._log import (
    Channels,
    Conn,
    ensure_conversation,
    notify,
    stored_parent,
)
from tether.store.postgres._submissions import COLUMN_COUNT, claim, get_submission, submission

__all__ = ("admit", "admit_and_claim", "admit_at_once", "steers")

_ADMIT = f"""
WITH asked AS (
    -- The tenant admitting: a child's parent's, when the parent is held; else the caller's.
    SELECT CASE WHEN EXISTS (SELECT 1 FROM submissions WHERE id = %(parent_id)s)
                THEN (SELECT tenant FROM submissions WHERE id = %(parent_id)s)
                ELSE %(tenant)s::text END AS tenant
), created AS (
    -- A new session's conversation, with its first record; not if the id is taken, so a
    -- conflicting dispatch leaves nothing behind.
    INSERT INTO conversations (id, agent, instance, session, created_at, parent, head,
                               head_hash, last_activity_at, bytes, tenant)
    SELECT %(cid)s, %(agent)s, %(instance)s, %(session)s, %(at)s, %(parent)s, 1, %(hash)s,
           %(first_at)s::timestamptz, %(bytes)s, asked.tenant
    FROM asked
    WHERE NOT EXISTS (SELECT 1 FROM submissions WHERE id = %(id)s)
    ON CONFLICT (agent, instance, session) DO NOTHING
    RETURNING id, tenant
), first_record AS (
    INSERT INTO records (conversation_id, seq, kind, body, prev_hash, hash)
    SELECT id, 1, %(kind)s, %(body)s, %(prev)s, %(hash)s FROM created
), conversation AS (
    -- The one just created, or the session's own (a statement does not see its own insert)
    -- if it is the admitting tenant's: another tenant's is left to the checked path to refuse.
    SELECT id, tenant FROM created
    UNION ALL
    SELECT c.id, c.tenant FROM conversations c, asked
    WHERE c.agent = %(agent)s AND c.instance = %(instance)s AND c.session = %(session)s
      AND (asked.tenant IS NULL OR c.tenant = asked.tenant)
), admitted AS (
    INSERT INTO submissions (id, dispatch_id, agent, instance, session, conversation_id,
                             status, input, created_at, trace, parent_submission_id,
                             parent_call_id, depth, tenant, wait_until, priority, claim_rank)
    SELECT %(id)s, %(dispatch)s, %(agent)s, %(instance)s, %(session)s, conversation.id,
           %(status)s, %(input)s, %(at)s, %(trace)s, %(parent_id)s, %(call_id)s, %(depth)s,
           conversation.tenant, %(run_at)s::timestamptz, %(priority)s, %(rank)s
    FROM conversation
    ON CONFLICT DO NOTHING
    RETURNING {SUBMISSION_COLUMNS}
)
SELECT admitted.*, CASE WHEN %(run_at)s::timestamptz IS NULL
                       THEN pg_notify(%(work)s, admitted.id) END,
       (SELECT pg_notify(%(append)s, created.id || ':1') FROM created),
       CASE WHEN %(steers)s THEN pg_notify(%(steer)s, admitted.conversation_id) END
FROM admitted
"""


def _link(new: NewSubmission) -> ConversationParent | None:
    """The ``parent`` of the conversation a child submission materializes."""
    return None if new.parent is None else new.parent.conversation_parent()


def _parent_columns(new: NewSubmission) -> dict[str, Any]:
    parent = new.parent
    return {
        "parent_id": None if parent is None else parent.submission_id,
        "call_id": None if parent is None else parent.call_id,
        "depth": 0 if parent is None else parent.depth,
    }


def _timing(new: NewSubmission) -> dict[str, Any]:
    """A delayed dispatch is admitted ``scheduled`` until its ``run_at`` (``wait_until``)."""
    return {"status": "queued" if new.run_at is None else "scheduled", "run_at": new.run_at}


def _rank_columns(new: NewSubmission) -> dict[str, Any]:
    """Its priority and claim order (``_priority``); ``ValueError`` before anything is
    written for a priority or aging out of range."""
    rank = new.claim_rank()
    return {"priority": new.priority, "rank": rank}


def steers(submission_input: Mapping[str, Any]) -> bool:
    """Whether a submission steers a running one (its runner then looks for it)."""
    return submission_input.get("kind") in ("steer", "follow_up")


async def admit_at_once(conn: Conn, new: NewSubmission, channels: Channels) -> Admission | None:
    """An admission in one statement (its own transaction), creating the session's
    conversation if it is new; ``None``, writing nothing, for an idempotent replay or a
    conflict, which the checked path then sorts out."""
    key = new.key
    conversation = Conversation(new.conversation_id, key, new.created_at, _link(new))
    first = seal_created(conversation, by=new.by)
    row = await (
        await conn.execute(
            _ADMIT,
            {
                "cid": conversation.id,
                "agent": key.agent,
                "instance": key.instance,
                "session": key.session,
                "at": new.created_at,
                "parent": stored_parent(conversation.parent),
                "kind": first.kind,
                "body": first.canonical,
                "prev": b"",
                "hash": bytes.fromhex(first.hash),
                "first_at": record_time(first.canonical),
                "bytes": len(first.canonical),
                "id": new.id,
                "dispatch": new.idempotency_key,
                "input": canonical_json(new.input),
                "trace": canonical_json(dict(new.trace)) if new.trace else None,
                **_parent_columns(new),
                **_timing(new),
                **_rank_columns(new),
                "tenant": new.tenant,
                "work": channels.work,
                "append": channels.append,
                "steers": steers(new.input),
                "steer": channels.steer,
            },
        )
    ).fetchone()
    return None if row is None else Admission(submission(row[:COLUMN_COUNT]), created=True)


async def admit_and_claim(
    conn: Conn,
    new: NewSubmission,
    attempt_id: str,
    owner_id: str,
    lease_expires_at: datetime,
    now: datetime,
    serves: VersionsServed | None,
    channels: Channels,
    slots: ClaimSlots | None = None,
) -> Admission:
    """In one transaction: admit, take the conversation's row lock, then claim if it is the
    head. The claim is a statement of its own, begun once the lock is held, so it sees every
    claim of the session that committed before (a claim takes that lock too): two admitting
    workers can never both find their submission the head. ``slots``: given back first; the
    new submission, as claimed, takes its limit slots (all, or none and it stays queued)."""
    if slots is not None:  # runs that ended: their slots are free
        await free_slots(conn, slots.give_back, channels.work)
    admission = await admit(conn, new, channels, wake=False)
    if not admission.created or new.run_at is not None:
        return admission  # a replay, or a delayed dispatch: never claimed at its admission
    await conn.execute(
        "SELECT 1 FROM conversations WHERE id = %s FOR UPDATE",
        (admission.submission.conversation_id,),
    )
    taken: list[LimitAsk] = []
    if slots is not None:
        claiming = dataclasses.replace(admission.submission, attempt_id=attempt_id)
        took = await take_slots(conn, slots, claiming, now)
        if took is None:  # its agent or tenant is at its limit: queued, held back
            await notify(conn, channels.work, new.id)
            return admission
        taken = took
    try:
        claimed = await claim(conn, new.id, attempt_id, owner_id, lease_expires_at, now, serves)
    except ClaimLost:  # behind an unsettled submission of its session, or not served here
        await give_back_slots(conn, taken)
        await notify(conn, channels.work, new.id)
        return admission
    return Admission(claimed, created=True)


async def _admitting_tenant(conn: Conn, new: NewSubmission) -> str | None:
    """The tenant an admission admits for: a child's parent's (when held), else its own;
    ``ConversationNotFound`` if the session exists and is not that tenant's."""
    tenant = new.tenant
    if new.parent is not None:
        held = await (
            await conn.execute(
                "SELECT tenant FROM submissions WHERE id = %s", (new.parent.submission_id,)
            )
        ).fetchone()
        if held is not None:
            tenant = held[0]
    if tenant is not None:
        key = new.key
        row = await (
            await conn.execute(
                "SELECT tenant FROM conversations WHERE agent = %s AND instance = %s "
                "AND session = %s",
                (key.agent, key.instance, key.session),
            )
        ).fetchone()
        if row is not None and row[0] != tenant:
            raise ConversationNotFound(str(key))
    return tenant


async def admit(
    conn: Conn, new: NewSubmission, channels: Channels, *, wake: bool = True
) -> Admission:
    payload = canonical_json(new.input)
    ranked = _rank_columns(new)  # a bad priority: ValueError before anything is read
    key = new.key
    parent = new.parent
    limit = None if parent is None else parent.max_total
    # A tree's total is counted under its root's lock, taken before the replay check: an
    # admission of the same child that held the lock first is then found, not counted.
    root = (
        None
        if parent is None or limit is None
        else await lock_tree_root(conn, parent.submission_id)
    )
    tenant = await _admitting_tenant(conn, new)  # before a replay: a foreign one is not told
    existing = await (
        await conn.execute(
            "SELECT id, input FROM submissions WHERE agent = %s AND instance = %s "
            "AND session = %s AND dispatch_id = %s",
            (key.agent, key.instance, key.session, new.idempotency_key),
        )
    ).fetchone()
    if existing is None:
        if root is not None and limit is not None:
            await check_tree_total(conn, root, limit)
        conversation, _ = await ensure_conversation(
            conn, key, new.conversation_id, new.created_at, channels, _link(new), tenant, new.by
        )
        if tenant is not None and conversation.tenant != tenant:  # created since it looked
            raise ConversationNotFound(str(key))
        inserted = await (
            await conn.execute(
                "INSERT INTO submissions (id, dispatch_id, agent, instance, session, "
                "conversation_id, status, input, created_at, trace, parent_submission_id, "
                "parent_call_id, depth, tenant, wait_until, priority, claim_rank) VALUES (%(id)s, "
                "%(dispatch)s, %(agent)s, %(instance)s, %(session)s, %(cid)s, %(status)s, "
                "%(input)s, %(at)s, %(trace)s, %(parent_id)s, %(call_id)s, %(depth)s, "
                "%(tenant)s, %(run_at)s, %(priority)s, %(rank)s) "
                "ON CONFLICT DO NOTHING RETURNING id",
                {
                    "id": new.id,
                    "dispatch": new.idempotency_key,
                    "agent": key.agent,
                    "instance": key.instance,
                    "session": key.session,
                    "cid": conversation.id,
                    "input": payload,
                    "at": new.created_at,
                    "trace": canonical_json(dict(new.trace)) if new.trace else None,
                    **_parent_columns(new),
                    **_timing(new),
                    **ranked,
                    "tenant": conversation.tenant,
                },
            )
        ).fetchone()
        if inserted is not None:
            if wake and new.run_at is None:
                await notify(conn, channels.work, new.id)
            if steers(new.input):
                await notify(conn, channels.steer, conversation.id)
            return Admission(await get_submission(conn, new.id), created=True)
        # A concurrent admission of the same dispatch won the race, or the id is taken.
        existing = await (
            await conn.execute(
                "SELECT id, input FROM submissions WHERE agent = %s AND instance = %s "
                "AND session = %s AND dispatch_id = %s",
                (key.agent, key.instance, key.session, new.idempotency_key),
            )
        ).fetchone()
        if existing is None:
            raise DispatchConflict(new.id, str(key))
    if bytes(existing[1]) != payload:
        raise DispatchConflict(new.idempotency_key, str(key))
    return Admission(await get_submission(conn, existing[0]), created=False)
