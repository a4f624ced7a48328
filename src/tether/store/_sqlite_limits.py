"""The SQL of shared limits (``LimitStore``) on SQLite: expiring holds per key in one table,
as plain functions over a connection (writes on the writer's, inside its transaction, which
``BEGIN IMMEDIATE`` serializes across every process on the file)."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta

from tether.store._common import from_micros, to_micros
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

__all__ = (
    "acquire_limit",
    "claim_slots",
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
    "VALUES (?, ?, ?, ?, ?, ?)"
)
_HOLDS = HOLDS_BY_KIND.format(p="?")


def acquire_limit(conn: sqlite3.Connection, ask: LimitAsk, when: GrantTime) -> datetime | None:
    now = read_now(when)  # in the write transaction: no other process decides meanwhile
    at = to_micros(now)
    conn.execute("DELETE FROM limit_holds WHERE key = ? AND expires_at <= ?", (ask.key, at))
    rows = conn.execute(_HOLDS, (ask.holder, ask.holder, ask.key, at)).fetchall()
    retry_at = decide(ask, holds_of(rows, from_micros))
    if retry_at is not None:
        return retry_at
    if ask.concurrency is not None:
        conn.execute(
            "DELETE FROM limit_holds WHERE key = ? AND kind = ? AND holder = ?",
            (ask.key, SLOT, ask.holder),
        )
        expires = to_micros(ask.slot_expires_at)
        conn.execute(_INSERT, (ask.key, SLOT, ask.holder, ask.owner_id, 1, expires))
    if ask.rate is not None and ask.per_seconds is not None:
        until = to_micros(now + timedelta(seconds=ask.per_seconds))
        conn.execute(_INSERT, (ask.key, CALL, ask.holder, ask.owner_id, ask.calls, until))
    return None


def claim_slots(
    conn: sqlite3.Connection, slots: ClaimSlots, heads: Sequence[ClaimedHead], now: datetime
) -> list[ClaimedHead]:
    """In the claim's transaction: each claimed head's slots, all or none (then
    ``slots_refused``)."""
    return [
        head
        if take_slots(conn, slots, head.submission, now) is not None
        else dataclasses.replace(head, slots_refused=True)
        for head in heads
    ]


def take_slots(
    conn: sqlite3.Connection, slots: ClaimSlots, submission: Submission, now: datetime
) -> list[LimitAsk] | None:
    """In a claim's transaction: every slot ``slots`` asks for ``submission`` (as claimed),
    answered, or none and ``None``."""
    asks = slots.asks(submission)
    for ask in asks:
        check_ask(ask)
    taken: list[LimitAsk] = []
    for ask in asks:
        if acquire_limit(conn, ask, now) is not None:
            give_back_slots(conn, taken)
            return None
        taken.append(ask)
    return taken


def give_back_slots(conn: sqlite3.Connection, taken: Sequence[LimitAsk]) -> None:
    for ask in taken:
        release_limit(conn, ask.key, ask.holder)


def release_limit(conn: sqlite3.Connection, key: str, holder: str, calls: int = 0) -> None:
    conn.execute(
        "DELETE FROM limit_holds WHERE key = ? AND kind = ? AND holder = ?", (key, SLOT, holder)
    )
    if calls > 0:  # a lease's unspent permits (one row per lease)
        conn.execute(
            "UPDATE limit_holds SET amount = MAX(amount - ?, 0) "
            "WHERE key = ? AND kind = ? AND holder = ?",
            (calls, key, CALL, holder),
        )
        conn.execute(
            "DELETE FROM limit_holds WHERE key = ? AND kind = ? AND holder = ? AND amount <= 0",
            (key, CALL, holder),
        )


def renew_limits(conn: sqlite3.Connection, owner_id: str, expires_at: datetime) -> int:
    return conn.execute(
        "UPDATE limit_holds SET expires_at = ? WHERE owner_id = ? AND kind = ?",
        (to_micros(expires_at), owner_id, SLOT),
    ).rowcount


def release_owner_limits(conn: sqlite3.Connection, owner_id: str) -> int:
    return conn.execute(
        "DELETE FROM limit_holds WHERE owner_id = ? AND kind = ?", (owner_id, SLOT)
    ).rowcount


def spend_limit(conn: sqlite3.Connection, key: str, tokens: int, now: datetime) -> None:
    until = to_micros(now + timedelta(seconds=TOKENS_WINDOW))
    conn.execute("DELETE FROM limit_holds WHERE key = ? AND expires_at <= ?", (key, to_micros(now)))
    conn.execute(_INSERT, (key, TOKENS, "", "", tokens, until))


def pause_limit(conn: sqlite3.Connection, key: str, until: datetime) -> None:
    conn.execute(_INSERT, (key, PAUSE, "", "", 0, to_micros(until)))


def limit_slots(conn: sqlite3.Connection, prefix: str, now: datetime) -> dict[str, int]:
    lower, upper = prefix_bounds(prefix)
    rows = conn.execute(
        "SELECT key, COUNT(*) FROM limit_holds WHERE key >= ? AND (?2 IS NULL OR key < ?2) "
        "AND kind = 'slot' AND expires_at > ? GROUP BY key",
        (lower, upper, to_micros(now)),
    ).fetchall()
    return {str(key): int(count) for key, count in rows}
