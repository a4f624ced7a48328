"""Shared limits (capability ``limits``): what one key's holds say about a new one.

A limit key (``agent:support``, ``tenant:acme``, ``model:openai``...) has holds, each a row
that expires: a ``slot`` (a run or a call in flight, renewed while its owner lives, so a
SIGKILLed worker's slots come back when they expire), a ``call`` (one model call, kept for
the rate's window: a sliding log, so no window of that length ever holds more calls than the
rate), ``tokens`` (what a call spent, kept for a minute) and ``pause`` (a provider's
``Retry-After``: nothing is granted before it ends). Every backend reads a key's live holds
and decides with :func:`decide` in one transaction serialized per key, then writes the
grant; the in-memory store is the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from tether.store._common import from_micros, to_micros
from tether.store._types import Submission

__all__ = (
    "CALL",
    "HOLDS_BY_KIND",
    "PAUSE",
    "SLOT",
    "TOKENS",
    "TOKENS_WINDOW",
    "ClaimSlots",
    "GrantTime",
    "HeldBack",
    "KeyHolds",
    "LimitAsk",
    "check_ask",
    "check_key",
    "decide",
    "holds_of",
    "prefix_bounds",
    "read_now",
)

SLOT: Final = "slot"
CALL: Final = "call"
TOKENS: Final = "tokens"
PAUSE: Final = "pause"
TOKENS_WINDOW: Final = 60.0
"""Seconds a ``tokens`` hold counts against ``tokens_per_minute``."""


GrantTime = datetime | Callable[[], datetime]
"""A grant's time: a moment, or a clock read once the key is locked, so that an ask that
waited for the lock (other workers' asks of the key) is decided at the time it is decided,
and a call it grants starts within moments of the time its window is counted from."""


def read_now(now: GrantTime) -> datetime:
    """The moment ``now`` says, as every backend keeps it (UTC, to the microsecond);
    ``ValueError`` if naive."""
    moment = now() if callable(now) else now
    return from_micros(to_micros(moment))


@dataclass(frozen=True, slots=True)
class HeldBack:
    """What a claim passes over: the heads of these agents and of these tenants (those at
    their limit of runs in flight). A head passed over keeps nothing behind it from being
    claimed, as an unservable version's does not.

    Example::

        await store.claim_runnable(..., held_back=HeldBack(agents=frozenset({"support"})))
    """

    agents: frozenset[str] = frozenset()
    tenants: frozenset[str] = frozenset()

    def holds(self, agent: str, tenant: str | None) -> bool:
        return agent in self.agents or (tenant is not None and tenant in self.tenants)

    def __bool__(self) -> bool:
        return bool(self.agents or self.tenants)


@dataclass(frozen=True, slots=True)
class ClaimSlots:
    """The slots a claim takes in its own transaction (limits of runs in flight): first it
    gives back the slots ``give_back`` names (``(key, holder)`` pairs: runs that ended), then,
    for each head it claims, takes the slots ``asks(claimed)`` names (their ``holder`` the
    claim's attempt id; decided at the claim's ``now``), all of them or none. A head whose
    asks are refused comes back with ``slots_refused``. No extra transaction per run: a
    run's slots come with its claim and go with a later claim.

    Example::

        slots = ClaimSlots(lambda s: [LimitAsk("agent:" + s.key.agent, str(s.attempt_id),
                                                 me, lease_end, concurrency=4)], ended)
        await store.claim_runnable(..., slots=slots)
    """

    asks: Callable[[Submission], Sequence[LimitAsk]]
    give_back: Sequence[tuple[str, str]] = ()


@dataclass(frozen=True, slots=True)
class LimitAsk:
    """What one grant of a key needs: at most ``concurrency`` slots held at once (this
    ``holder``'s own not counted, so asking twice is one slot), at most ``rate`` calls in any
    ``per_seconds``, under ``tokens_per_minute`` tokens spent in the last minute. ``None``:
    no such limit. A grant takes a slot (expiring at ``slot_expires_at``) if ``concurrency``
    is set, and ``calls`` calls if ``rate`` is: all of them or none (a worker leasing
    several permits at once, spent in process, asks for more than one)."""

    key: str
    holder: str
    owner_id: str
    slot_expires_at: datetime
    concurrency: int | None = None
    rate: int | None = None
    per_seconds: float | None = None
    tokens_per_minute: int | None = None
    calls: int = 1


def check_key(key: str) -> None:
    """``ValueError`` for a key no backend can keep (empty, or with a NUL)."""
    if not key or "\x00" in key:
        raise ValueError("a limit key must be a non-empty string without NUL")


def check_ask(ask: LimitAsk) -> None:
    """``ValueError`` for an ask no backend can keep: an empty key or holder, a limit
    under 1, a rate without a positive window, a naive time."""
    check_key(ask.key)
    if not ask.holder or "\x00" in ask.holder or "\x00" in ask.owner_id:
        raise ValueError("a limit holder must be a non-empty string without NUL")
    for name in ("concurrency", "rate", "tokens_per_minute"):
        value = getattr(ask, name)
        if value is not None and value < 1:
            raise ValueError(f"{name} must be 1 or more, not {value}")
    if ask.rate is not None and not (ask.per_seconds is not None and ask.per_seconds > 0):
        raise ValueError("a rate needs per_seconds greater than 0")
    if isinstance(ask.calls, bool) or not isinstance(ask.calls, int) or ask.calls < 1:
        raise ValueError(f"calls must be an int of 1 or more, not {ask.calls!r}")
    if ask.rate is not None and ask.calls > ask.rate:
        raise ValueError(f"calls ({ask.calls}) must not be more than the rate ({ask.rate})")
    if ask.slot_expires_at.tzinfo is None:
        raise ValueError("datetimes given to a store must be timezone-aware")


@dataclass(frozen=True, slots=True)
class KeyHolds:
    """A key's live holds (expired ones dropped), summed per kind; ``None`` times when the
    kind has none. ``mine``: whether the asker holds a slot already."""

    slots: int = 0
    first_slot_expiry: datetime | None = None
    calls: int = 0
    first_call_expiry: datetime | None = None
    tokens: int = 0
    first_tokens_expiry: datetime | None = None
    paused_until: datetime | None = None
    mine: bool = False


def decide(ask: LimitAsk, holds: KeyHolds) -> datetime | None:
    """``None`` if ``ask`` may be granted now, else the earliest time it might be: the end of
    a pause, when the oldest call or tokens leave their window (exact), or when the first
    slot's lease would expire (a slot released sooner frees it sooner: ask again then)."""
    if holds.paused_until is not None:
        return holds.paused_until
    if (
        ask.concurrency is not None
        and not holds.mine
        and holds.slots >= ask.concurrency
        and holds.first_slot_expiry is not None
    ):
        return holds.first_slot_expiry
    if (
        ask.rate is not None
        and holds.calls + ask.calls > ask.rate
        and holds.first_call_expiry is not None
    ):
        return holds.first_call_expiry
    if (
        ask.tokens_per_minute is not None
        and holds.tokens >= ask.tokens_per_minute
        and holds.first_tokens_expiry is not None
    ):
        return holds.first_tokens_expiry
    return None


HOLDS_BY_KIND: Final = (
    "SELECT kind, COUNT(*), SUM(CASE WHEN holder = {p} THEN 1 ELSE 0 END), SUM(amount), "
    "MIN(CASE WHEN kind <> 'slot' OR holder <> {p} THEN expires_at END), MAX(expires_at) "
    "FROM limit_holds WHERE key = {p} AND expires_at > {p} GROUP BY kind"
)
"""The SQL backends' read of one key's live holds (``{p}``: the placeholder; parameters
``holder, holder, key, now``), one row per kind for :func:`holds_of`."""


def holds_of(rows: Iterable[Any], time_of: Callable[[Any], datetime]) -> KeyHolds:
    """:class:`KeyHolds` from the rows of :data:`HOLDS_BY_KIND` (times read with
    ``time_of``)."""
    found: dict[str, Any] = {}
    mine = False
    for kind, count, my_count, amount, first_other, last in rows:
        at = None if first_other is None else time_of(first_other)
        if kind == SLOT:
            mine = bool(my_count)
            found["slots"] = int(count) - int(my_count or 0)
            found["first_slot_expiry"] = at
        elif kind == CALL:
            found["calls"] = int(amount or 0)  # a lease of several permits is one row
            found["first_call_expiry"] = at
        elif kind == TOKENS:
            found["tokens"] = int(amount or 0)
            found["first_tokens_expiry"] = at
        elif kind == PAUSE:
            found["paused_until"] = time_of(last)
    return KeyHolds(mine=mine, **found)


def prefix_bounds(prefix: str) -> tuple[str, str | None]:
    """The range of keys starting with ``prefix``: ``lower <= key < upper`` (``upper``
    ``None``: no bound), so an index on the key serves the scan."""
    if not prefix:
        return "", None
    last = prefix[-1]
    if ord(last) >= 0x10FFFF:
        return prefix, None
    return prefix, prefix[:-1] + chr(ord(last) + 1)
