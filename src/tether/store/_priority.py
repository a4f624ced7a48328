"""Claim order by priority with aging: the one number a store sorts queued heads by.

A submission's effective priority is its ``priority`` plus one for every ``aging`` it has
waited. For two queued heads at one moment ``now``, comparing ``priority + (now -
created_at) / aging`` is comparing ``priority - created_at / aging``: ``now`` cancels out.
So the order is a key fixed at admission, ``claim_rank = created_at - priority * aging``
(microseconds since the epoch): the moment the submission counts as queued since, one
``aging`` earlier for each step of priority. A claim reads the queued heads in
``(claim_rank, position)`` order from an index, as it read them by ``position`` before, with
no expression of the clock in the query. Starvation-free: a head queued at ``t`` is passed
over only by submissions admitted before ``t + (PRIORITY_MAX - its priority) * aging``;
everything admitted after that ranks behind it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tether._limits import PRIORITY_MAX, PRIORITY_MIN

__all__ = (
    "DEFAULT_PRIORITY_AGING",
    "MAX_PRIORITY_AGING",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "check_priority",
    "check_priority_aging",
    "claim_rank",
)

DEFAULT_PRIORITY_AGING = timedelta(seconds=60)
"""How long a queued submission waits to gain one step of priority, by default: priority
``p`` goes ahead of what was queued up to ``p`` minutes before it."""
MAX_PRIORITY_AGING = timedelta(days=1)
"""The longest aging step accepted (a rank stays within a few thousand years of its
admission, well inside every backend's range)."""


def check_priority(priority: object) -> int:
    """``priority`` if it is an integer within ``PRIORITY_MIN..PRIORITY_MAX`` (not a bool);
    ``ValueError`` otherwise."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValueError(f"priority must be an integer, got {priority!r}")
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(
            f"priority must be between {PRIORITY_MIN} and {PRIORITY_MAX}, got {priority}"
        )
    return priority


def check_priority_aging(aging: timedelta) -> timedelta:
    """``aging`` if it is positive and at most ``MAX_PRIORITY_AGING``; ``ValueError``
    otherwise (a zero step would make priority rank nothing, a negative one invert it)."""
    if not timedelta(0) < aging <= MAX_PRIORITY_AGING:
        raise ValueError(f"priority aging must be in (0, {MAX_PRIORITY_AGING}], got {aging}")
    return aging


def claim_rank(created_at: datetime, priority: int, aging: timedelta) -> int:
    """The key a queued head is claimed by, lowest first (ties by admission order): its
    admission time in microseconds, ``priority`` agings earlier."""
    if created_at.tzinfo is None:
        raise ValueError("datetimes given to a store must be timezone-aware")
    micro = timedelta(microseconds=1)
    step = check_priority_aging(aging) // micro
    return (created_at - _EPOCH) // micro - check_priority(priority) * step


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
