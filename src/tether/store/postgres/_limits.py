"""The SQL of shared limits (``LimitStore``) on PostgreSQL: expiring holds per key in one
table, every grant in a transaction that first takes the key's advisory lock, so that the
workers of every process decide one key's grants one at a time."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from tether.store._limits import (
    CALL,
    HOLDS_BY_KIND,
    PAUSE,
    SLOT,
    TOKENS,
    TOKENS_WINDOW,
    ClaimSlots,
    GrantTime,
    LimitAsk,
    check_ask,
    decide,
    holds_of,
    prefix_bounds,
    read_now,
)
from tether.store._types import ClaimedHead, Submission
from tether.store.postgres._log import Conn, notify

__all__ = (
    "acquire_limit",
    "claim_slots",
    "free_slots",
    "give_back_slots",
    "limit_slots",
    "pause_limit",
    "release_limit",
    "release_owner_limits",
    "renew_limits",
    "spend_limit",
    "take_slots",
)

_INSERT = (
    "INSERT INTO limit_holds (key, kind, holder, owner_id, amount, expires_at) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
_PRUNE_AND_READ = (
    "WITH gone AS (DELETE FROM limit_holds WHERE key = %s AND expires_at <= %s) "
    + HOLDS_BY_KIND.format(p="%s")
)
# Keyed by the hash of the key with a prefix of its own (a hash that collides with another
# advisory lock's only serializes the two, never lets one through).
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('tether-limit:' || %s, 0))"


def _same(moment: datetime) -> datetime:
    return moment  # timestamptz columns arrive as aware datetimes


async def acquire_limit(
    conn: Conn, ask: LimitAsk, when: GrantTime, *, locked: bool = False
) -> datetime | None:
    """In a transaction (the store's ``_run``): the key's lock is held to its commit
    (``locked``: taken already)."""
    if not locked:
        await conn.execute(_LOCK, (ask.key,))
    now = read_now(when)  # once the lock is ours: no other worker decides meanwhile
    # One round trip: the expired holds go as the live ones are read (the read filters on
    # expiry itself, so that it does not see the delete does not matter).
    rows = await (
        await conn.execute(_PRUNE_AND_READ, (ask.key, now, ask.holder, ask.holder, ask.key, now))
    ).fetchall()
    retry_at = decide(ask, holds_of(rows, _same))
    if retry_at is not None:
        return retry_at
    values: list[tuple[object, ...]] = []
    if ask.concurrency is not None:
        values.append((ask.key, SLOT, ask.holder, ask.owner_id, 1, ask.slot_expires_at))
    if ask.rate is not None and ask.per_seconds is not None:
        until = now + timedelta(seconds=ask.per_seconds)
        values.append((ask.key, CALL, ask.holder, ask.owner_id, ask.calls, until))
    if values:  # one round trip: the holder's earlier slot of the key goes, the grant comes
        rows_sql = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(values))
        await conn.execute(
            f"WITH gone AS (DELETE FROM limit_holds WHERE key = %s AND kind = '{SLOT}' "
            f"AND holder = %s AND %s) INSERT INTO limit_holds (key, kind, holder, owner_id, "
            f"amount, expires_at) VALUES {rows_sql}",
            (
                ask.key,
                ask.holder,
                ask.concurrency is not None,
                *(value for row in values for value in row),
            ),
        )
    return None


async def claim_slots(
    conn: Conn, slots: ClaimSlots, heads: Sequence[ClaimedHead], now: datetime
) -> list[ClaimedHead]:
    """In the claim's transaction: each claimed head's slots, all or none (then
    ``slots_refused``). Every key is locked first, in one order, so that two claims
    locking keys of the same heads never wait for each other in a cycle."""
    asks_of = [slots.asks(head.submission) for head in heads]
    for asks in asks_of:
        for ask in asks:
            check_ask(ask)
    for key in sorted({ask.key for asks in asks_of for ask in asks}):
        await conn.execute(_LOCK, (key,))
    return [
        head
        if await _take_locked(conn, asks, now) is not None
        else dataclasses.replace(head, slots_refused=True)
        for head, asks in zip(heads, asks_of, strict=True)
    ]


async def take_slots(
    conn: Conn, slots: ClaimSlots, submission: Submission, now: datetime
) -> list[LimitAsk] | None:
    """In a claim's transaction: every slot ``slots`` asks for ``submission`` (as claimed),
    answered, or none and ``None``; its keys locked first, in one order."""
    asks = slots.asks(submission)
    for ask in asks:
        check_ask(ask)
    for key in sorted({ask.key for ask in asks}):
        await conn.execute(_LOCK, (key,))
    return await _take_locked(conn, asks, now)


async def _take_locked(
    conn: Conn, asks: Sequence[LimitAsk], now: datetime
) -> list[LimitAsk] | None:
    taken: list[LimitAsk] = []
    for ask in asks:
        if await acquire_limit(conn, ask, now, locked=True) is not None:
            await give_back_slots(conn, taken)
            return None
        taken.append(ask)
    return taken


async def free_slots(conn: Conn, pairs: Sequence[tuple[str, str]], work: str) -> None:
    """Give back the slots of runs that ended (``(key, holder)`` pairs) and, at the commit,
    wake every worker's claim loop (on the ``work`` channel): a head held back for one of
    them may be claimed now, without waiting for a poll."""
    for key, holder in pairs:
        await release_limit(conn, key, holder)
    if pairs:
        await notify(conn, work, "slots")


async def give_back_slots(conn: Conn, taken: Sequence[LimitAsk]) -> None:
    for ask in taken:
        await release_limit(conn, ask.key, ask.holder)


async def release_limit(conn: Conn, key: str, holder: str, calls: int = 0) -> None:
    await conn.execute(
        "DELETE FROM limit_holds WHERE key = %s AND kind = %s AND holder = %s",
        (key, SLOT, holder),
    )
    if calls > 0:  # a lease's unspent permits (one row per lease): one statement, atomic
        await conn.execute(
            "WITH given AS (UPDATE limit_holds SET amount = amount - %s WHERE key = %s "
            "AND kind = %s AND holder = %s AND amount > %s RETURNING 1) "
            "DELETE FROM limit_holds WHERE key = %s AND kind = %s AND holder = %s "
            "AND amount <= %s",
            (calls, key, CALL, holder, calls, key, CALL, holder, calls),
        )


async def renew_limits(conn: Conn, owner_id: str, expires_at: datetime) -> int:
    cursor = await conn.execute(
        "UPDATE limit_holds SET expires_at = %s WHERE owner_id = %s AND kind = %s",
        (expires_at, owner_id, SLOT),
    )
    return cursor.rowcount


async def release_owner_limits(conn: Conn, owner_id: str) -> int:
    cursor = await conn.execute(
        "DELETE FROM limit_holds WHERE owner_id = %s AND kind = %s", (owner_id, SLOT)
    )
    return cursor.rowcount


async def spend_limit(conn: Conn, key: str, tokens: int, now: datetime) -> None:
    await conn.execute(
        _INSERT, (key, TOKENS, "", "", tokens, now + timedelta(seconds=TOKENS_WINDOW))
    )


async def pause_limit(conn: Conn, key: str, until: datetime) -> None:
    await conn.execute(_INSERT, (key, PAUSE, "", "", 0, until))


async def limit_slots(conn: Conn, prefix: str, now: datetime) -> dict[str, int]:
    lower, upper = prefix_bounds(prefix)
    rows = await (
        await conn.execute(
            "SELECT key, COUNT(*) FROM limit_holds WHERE key >= %s "
            "AND (%s::text IS NULL OR key < %s) AND kind = 'slot' "
            "AND expires_at > %s GROUP BY key",
            (lower, upper, upper, now),
        )
    ).fetchall()
    return {str(key): int(count) for key, count in rows}
