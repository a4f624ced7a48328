"""The SQL of tenant usage (``UsageStore``) on SQLite: each tenant's spending per UTC day,
moved by the appends that spend in their own transaction, and the reservations of its model
calls in flight, as plain functions over a connection (writes on the writer's, inside its
transaction, which ``BEGIN IMMEDIATE`` serializes across every process on the file)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import date, datetime

from tether.records import Record
from tether.store._common import to_micros
from tether.store._usage import (
    UsageAsk,
    UsageLease,
    UsageRefusal,
    UsageReserved,
    UsageSpent,
    decide_usage,
    held_by,
    share_of,
    spends_of,
)

__all__ = ("add_usage", "lease_usage", "release_usage", "renew_usage", "tenant_usage")

_ADD = (
    "INSERT INTO tenant_usage (tenant, day, model_calls, tokens, cost_usd, tool_calls, "
    "max_call_tokens, max_call_cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (tenant, day) DO UPDATE SET model_calls = model_calls + excluded.model_calls, "
    "tokens = tokens + excluded.tokens, cost_usd = cost_usd + excluded.cost_usd, "
    "tool_calls = tool_calls + excluded.tool_calls, "
    "max_call_tokens = max(max_call_tokens, excluded.max_call_tokens), "
    "max_call_cost = max(max_call_cost, excluded.max_call_cost)"
)
_RELEASE = (
    "DELETE FROM usage_reservations WHERE rowid IN (SELECT rowid FROM usage_reservations "
    "WHERE tenant = ? AND holder = ? ORDER BY tokens, cost_usd, rowid LIMIT ?)"
)


def add_usage(
    conn: sqlite3.Connection, tenant: str, holder: str, records: Sequence[Record]
) -> None:
    """Inside an append's transaction: what ``records`` (of a conversation of ``tenant``)
    spend, added to the tenant's days; a reservation of ``holder`` (the conversation, or the
    share the append names) given back for each model call they complete. Records that
    spend nothing cost a kind comparison each (the append of a conversation of no tenant
    does not call this)."""
    released = 0
    for spend in spends_of(records):
        s = spend.spent
        conn.execute(
            _ADD,
            (
                tenant,
                spend.day.isoformat(),
                s.model_calls,
                s.tokens,
                s.cost_usd,
                s.tool_calls,
                s.max_call_tokens,
                s.max_call_cost,
            ),
        )
        released += spend.completions
    if released:
        conn.execute(_RELEASE, (tenant, holder, released))


def tenant_usage(conn: sqlite3.Connection, tenant: str, start: date, end: date) -> UsageSpent:
    row = conn.execute(
        "SELECT count(*), sum(model_calls), sum(tokens), sum(cost_usd), sum(tool_calls), "
        "max(max_call_tokens), max(max_call_cost) FROM tenant_usage "
        "WHERE tenant = ? AND day >= ? AND day < ?",
        (tenant, start.isoformat(), end.isoformat()),
    ).fetchone()
    if not row[0]:
        return UsageSpent()
    return UsageSpent(
        int(row[1]), int(row[2]), float(row[3]), int(row[4]), int(row[5]), float(row[6])
    )


def lease_usage(
    conn: sqlite3.Connection, ask: UsageAsk, now: datetime
) -> UsageLease | UsageRefusal:
    """In the writer's transaction: no other process decides meanwhile."""
    conn.execute(
        "DELETE FROM usage_reservations WHERE tenant = ? AND expires_at <= ?",
        (ask.tenant, to_micros(now)),
    )
    calls, tokens, cost = conn.execute(
        "SELECT count(*), coalesce(sum(tokens), 0), coalesce(sum(cost_usd), 0.0) "
        "FROM usage_reservations WHERE tenant = ?",
        (ask.tenant,),
    ).fetchone()
    reserved = UsageReserved(int(calls), int(tokens), float(cost))
    spents = [tenant_usage(conn, ask.tenant, limit.start, limit.end) for limit in ask.limits]
    refused = decide_usage(ask, spents, reserved)
    if refused is not None:
        return refused
    hold = held_by(spents)
    granted = share_of(ask, spents, reserved, hold)
    row = (ask.tenant, ask.holder, ask.owner_id, *hold, to_micros(ask.expires_at))
    conn.executemany(
        "INSERT INTO usage_reservations (tenant, holder, owner_id, tokens, cost_usd, "
        "expires_at) VALUES (?, ?, ?, ?, ?, ?)",
        [row] * granted,
    )
    return UsageLease(granted, *hold)


def release_usage(conn: sqlite3.Connection, tenant: str, holder: str, calls: int) -> None:
    conn.execute(_RELEASE, (tenant, holder, calls))


def renew_usage(conn: sqlite3.Connection, owner_id: str, expires_at: datetime) -> int:
    return conn.execute(
        "UPDATE usage_reservations SET expires_at = ? WHERE owner_id = ?",
        (to_micros(expires_at), owner_id),
    ).rowcount
