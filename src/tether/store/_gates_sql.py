"""The SQL of the gate index, shared by the SQLite and PostgreSQL stores.

Both keep a ``gates`` table (SQLite v8, PostgreSQL v5; its kind, an input's prompt, schema
and answer since SQLite v12, PostgreSQL v8) with one index per combination of the optional
filters, each led by the status and the kind and ending with the listing order
(``requested_at, conversation_id, seq``): every page of every filter is an index range
read in order, ``limit`` rows long, and a listing of one kind never reads the other's rows
(the pending inputs are not found among every approval). A listing of every status, or of
both kinds, reads one such page per (status, kind) and merges them
(:func:`tether.store._gates.merge_pages`), so neither needs indexes of its own.

Who decided, as the server verified them (SQLite v17, PostgreSQL v12), is kept as the canonical
JSON of the decision's ``by`` (an :class:`~tether.records.Actor`), NULL when none was recorded.

A tenant's listing (SQLite v15, PostgreSQL v10: each gate keeps its conversation's tenant) has
the same indexes again, led by the tenant: partial, ``WHERE tenant IS NOT NULL``, so that a
store whose sessions have no tenant pays nothing for them, and a tenant's page is a range of
its own rows, never a filter over every tenant's. The operator's listing (no tenant) reads
the indexes above.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

import orjson

from tether._canonical import canonical_json
from tether.records import Actor
from tether.store._gates import (
    Gate,
    GateChange,
    GateClosed,
    GateDecided,
    GateKind,
    GateRequested,
    GateSettled,
    GateStatus,
)
from tether.store._types import SessionKey

__all__ = (
    "FILTERS",
    "GATE_COLUMNS",
    "INDEXED",
    "actor_json",
    "gate_from_row",
    "gate_query",
    "gate_statements",
)

FILTERS = ("agent", "instance", "tool")
"""The optional filters of a listing, besides its status, kind and tenant."""

INDEXED: tuple[tuple[str, ...], ...] = tuple(
    (*lead, "status", "kind", *chosen)
    for lead in ((), ("tenant",))
    for n in range(len(FILTERS) + 1)
    for chosen in combinations(FILTERS, n)
)
"""The equality columns of each listing index, in the order the schemas create them (those
led by the tenant are partial: ``WHERE tenant IS NOT NULL``)."""

GATE_COLUMNS = (
    "approval_id, conversation_id, seq, agent, instance, session, submission_id, execution_id, "
    "call_id, tool, args, args_digest, requested_at, status, decision, edited_args, reason, "
    "approver, decided_at, closed_at, kind, prompt, answer_schema, answer, tenant, decided_by, "
    "metadata"
)
"""The columns a gate row is read with, in the order ``gate_from_row`` takes."""

_ORDER = "requested_at, conversation_id, seq"


def gate_from_row(row: Sequence[Any], moment: Callable[[Any], Any]) -> Gate:
    """A row of ``GATE_COLUMNS`` as a gate; ``moment`` reads the backend's times."""
    (
        approval_id,
        conversation_id,
        seq,
        agent,
        instance,
        session,
        submission_id,
        execution_id,
        call_id,
        tool,
        args,
        args_digest,
        requested_at,
        status,
        decision,
        edited_args,
        reason,
        approver,
        decided_at,
        closed_at,
        kind,
        prompt,
        answer_schema,
        answer,
        tenant,
        decided_by,
        metadata,
    ) = row
    return Gate(
        approval_id=approval_id,
        conversation_id=conversation_id,
        seq=int(seq),
        key=SessionKey(agent, instance, session),
        submission_id=submission_id,
        execution_id=execution_id,
        call_id=call_id,
        tool=tool,
        args=orjson.loads(args),
        args_digest=args_digest,
        requested_at=moment(requested_at),
        status=GateStatus(status),
        decision=decision,
        edited_args=None if edited_args is None else orjson.loads(edited_args),
        reason=reason,
        approver=approver,
        decided_at=None if decided_at is None else moment(decided_at),
        closed_at=None if closed_at is None else moment(closed_at),
        kind=GateKind(kind),
        prompt=prompt,
        answer_schema=None if answer_schema is None else orjson.loads(answer_schema),
        answer=None if answer is None else orjson.loads(answer),
        tenant=tenant,
        decided_by=None if decided_by is None else Actor.model_validate_json(bytes(decided_by)),
        metadata=None if metadata is None else orjson.loads(metadata),
    )


def actor_json(actor: Actor | None) -> bytes | None:
    """How a gate row keeps who decided: the canonical JSON of the record's ``by``."""
    return None if actor is None else canonical_json(actor.to_json_object())


def gate_query(
    status: GateStatus,
    kind: GateKind,
    filters: dict[str, str | None],
    after: tuple[Any, str, int] | None,
    limit: int,
    placeholder: str,
) -> tuple[str, list[Any]]:
    """The page of one status and kind: only the filters given (the tenant among them),
    each a plain equality (spelled as the index of exactly those columns leads), then the
    rows past ``after`` in listing order."""
    p = placeholder
    terms: list[str] = [f"status = {p}", f"kind = {p}"]
    params: list[Any] = [status.value, kind.value]
    for column in ("tenant", *FILTERS):
        value = filters.get(column)
        if value is not None:
            terms.append(f"{column} = {p}")
            params.append(value)
    if after is not None:
        terms.append(f"({_ORDER}) > ({p}, {p}, {p})")
        params.extend(after)
    return (
        f"SELECT {GATE_COLUMNS} FROM gates WHERE {' AND '.join(terms)} ORDER BY {_ORDER} LIMIT {p}",
        [*params, limit],
    )


def gate_statements(
    conversation_id: str,
    changes: Sequence[GateChange],
    *,
    placeholder: str,
    moment: Callable[[Any], Any],
    same: str,
) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements that apply ``changes`` to the conversation's gates, in order.

    ``moment`` writes a time as the backend stores it; ``same`` is the backend's null-safe
    equality (``IS`` on SQLite, ``IS NOT DISTINCT FROM`` on PostgreSQL). The updates name
    ``status = 'pending'`` as the partial index of open gates says."""
    p = placeholder
    statements: list[tuple[str, tuple[Any, ...]]] = []
    for change in changes:
        if isinstance(change, GateRequested):
            statements.append(
                (
                    "INSERT INTO gates (conversation_id, seq, approval_id, agent, instance, "
                    "session, submission_id, execution_id, call_id, tool, args, args_digest, "
                    "requested_at, status, kind, prompt, answer_schema, metadata, tenant) SELECT "
                    f"id, {p}, {p}, agent, instance, session, {p}, {p}, {p}, {p}, {p}, {p}, {p}, "
                    f"'pending', {p}, {p}, {p}, {p}, tenant FROM conversations WHERE id = {p}",
                    (
                        change.seq,
                        change.approval_id,
                        change.submission_id,
                        change.execution_id,
                        change.call_id,
                        change.tool,
                        change.args,
                        change.args_digest,
                        moment(change.at),
                        change.kind.value,
                        change.prompt,
                        change.answer_schema,
                        change.metadata,
                        conversation_id,
                    ),
                )
            )
        elif isinstance(change, GateDecided):
            statements.append(
                (
                    f"UPDATE gates SET status = 'decided', decision = {p}, edited_args = {p}, "
                    f"reason = {p}, approver = {p}, decided_at = {p}, answer = {p}, "
                    f"decided_by = {p} WHERE conversation_id = {p} AND status = 'pending' "
                    f"AND approval_id = {p} AND kind = {p}",
                    (
                        change.decision,
                        change.args,
                        change.reason,
                        change.approver,
                        moment(change.at),
                        change.answer,
                        actor_json(change.by),
                        conversation_id,
                        change.approval_id,
                        change.kind.value,
                    ),
                )
            )
        elif isinstance(change, GateClosed):
            statements.append(
                (
                    f"UPDATE gates SET status = 'closed', closed_at = {p} "
                    f"WHERE conversation_id = {p} AND status = 'pending' AND call_id = {p} "
                    f"AND execution_id {same} {p}",
                    (moment(change.at), conversation_id, change.call_id, change.execution_id),
                )
            )
        elif isinstance(change, GateSettled):
            statements.append(
                (
                    f"UPDATE gates SET status = 'closed', closed_at = {p} "
                    f"WHERE conversation_id = {p} AND status = 'pending' AND kind = 'budget' "
                    f"AND submission_id = {p}",
                    (moment(change.at), conversation_id, change.submission_id),
                )
            )
    return statements
