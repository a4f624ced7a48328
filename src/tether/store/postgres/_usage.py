"""The SQL of tenant usage (``UsageStore``) on PostgreSQL: each tenant's spending per UTC
day, moved by the checked append of every record that spends, in its transaction; and the
reservations of its model calls in flight, every reservation decided in a transaction that
first takes the tenant's advisory lock, so that every worker of every process decides one
tenant's reservations one at a time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from psycopg import AsyncConnection
from psycopg.rows import TupleRow

from tether.records import Record
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

Conn = AsyncConnection[TupleRow]

_ADD = (
    "INSERT INTO tenant_usage AS u (tenant, day, model_calls, tokens, cost_usd, tool_calls, "
    "max_call_tokens, max_call_cost) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT (tenant, day) DO UPDATE SET model_calls = u.model_calls + excluded.model_calls, "
    "tokens = u.tokens + excluded.tokens, cost_usd = u.cost_usd + excluded.cost_usd, "
    "tool_calls = u.tool_calls + excluded.tool_calls, "
    "max_call_tokens = greatest(u.max_call_tokens, excluded.max_call_tokens), "
    "max_call_cost = greatest(u.max_call_cost, excluded.max_call_cost)"
)
_RELEASE = (
    "DELETE FROM usage_reservations WHERE id IN (SELECT id FROM usage_reservations "
    "WHERE tenant = %s AND holder = %s ORDER BY tokens, cost_usd, id LIMIT %s)"
)
# Keyed by the hash of the tenant with a prefix of its own (a hash that collides with another
# advisory lock's only serializes the two, never lets one through).
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('tether-usage:' || %s, 0))"


async def add_usage(conn: Conn, tenant: str, holder: str, records: Sequence[Record]) -> None:
    """Inside an append's transaction: what ``records`` spend, added to ``tenant``'s days; a
    reservation of ``holder`` (the conversation, or the share the append names) given back
    for each model call they complete."""
    released = 0
    for spend in spends_of(records):
        s = spend.spent
        await conn.execute(
            _ADD,
            (
                tenant,
                spend.day,
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
        await conn.execute(_RELEASE, (tenant, holder, released))


async def tenant_usage(conn: Conn, tenant: str, start: date, end: date) -> UsageSpent:
    row = await (
        await conn.execute(
            "SELECT count(*), sum(model_calls), sum(tokens), sum(cost_usd), sum(tool_calls), "
            "max(max_call_tokens), max(max_call_cost) FROM tenant_usage "
            "WHERE tenant = %s AND day >= %s AND day < %s",
            (tenant, start, end),
        )
    ).fetchone()
    if row is None or not row[0]:
        return UsageSpent()
    return UsageSpent(
        int(row[1]), int(row[2]), float(row[3]), int(row[4]), int(row[5]), float(row[6])
    )


async def lease_usage(conn: Conn, ask: UsageAsk, now: datetime) -> UsageLease | UsageRefusal:
    """In a transaction (the store's ``_run``): the tenant's lock is held to its commit."""
    await conn.execute(_LOCK, (ask.tenant,))
    await conn.execute(
        "DELETE FROM usage_reservations WHERE tenant = %s AND expires_at <= %s",
        (ask.tenant, now),
    )
    row = await (
        await conn.execute(
            "SELECT count(*), coalesce(sum(tokens), 0), coalesce(sum(cost_usd), 0) "
            "FROM usage_reservations WHERE tenant = %s",
            (ask.tenant,),
        )
    ).fetchone()
    assert row is not None
    reserved = UsageReserved(int(row[0]), int(row[1]), float(row[2]))
    spents = [await tenant_usage(conn, ask.tenant, lim.start, lim.end) for lim in ask.limits]
    refused = decide_usage(ask, spents, reserved)
    if refused is not None:
        return refused
    hold = held_by(spents)
    granted = share_of(ask, spents, reserved, hold)
    await conn.execute(
        "INSERT INTO usage_reservations (tenant, holder, owner_id, tokens, cost_usd, "
        "expires_at) SELECT %s, %s, %s, %s, %s, %s FROM generate_series(1, %s)",
        (ask.tenant, ask.holder, ask.owner_id, *hold, ask.expires_at, granted),
    )
    return UsageLease(granted, *hold)


async def release_usage(conn: Conn, tenant: str, holder: str, calls: int) -> None:
    await conn.execute(_RELEASE, (tenant, holder, calls))


async def renew_usage(conn: Conn, owner_id: str, expires_at: datetime) -> int:
    cursor = await conn.execute(
        "UPDATE usage_reservations SET expires_at = %s WHERE owner_id = %s",
        (expires_at, owner_id),
    )
    return cursor.rowcount
