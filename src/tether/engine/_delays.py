"""When a delayed dispatch is due: ``runAt`` / ``afterSeconds`` checked against the runtime's
clock (one or the other, in the future, and not absurdly far)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Final

from tether.errors import InvalidDispatch

__all__ = ("MAX_DELAY", "due_time")

MAX_DELAY: Final = timedelta(days=3660)
"""The furthest a dispatch may be delayed (about ten years): past it, a time is a mistake
(milliseconds taken for seconds, a year typed wrong), refused before anything is written."""


def due_time(
    now: datetime, run_at: datetime | None, after: timedelta | float | None
) -> datetime | None:
    """When a dispatch given ``run_at`` (timezone-aware) or ``after`` (a delay, or seconds)
    is due, in UTC; ``None`` for neither (it is queued at once). ``InvalidDispatch`` for both,
    a naive or past ``run_at``, a negative or non-finite ``after``, or either past
    :data:`MAX_DELAY` from ``now``."""
    if run_at is not None and after is not None:
        raise InvalidDispatch("give runAt or afterSeconds, not both", field="runAt")
    if after is not None:
        seconds = after.total_seconds() if isinstance(after, timedelta) else float(after)
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidDispatch("must be a finite number of seconds >= 0", field="afterSeconds")
        if seconds > MAX_DELAY.total_seconds():
            raise InvalidDispatch(
                f"must be at most {int(MAX_DELAY.total_seconds())} seconds", field="afterSeconds"
            )
        return now + timedelta(seconds=seconds)
    if run_at is None:
        return None
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise InvalidDispatch("must carry a timezone (RFC 3339)", field="runAt")
    due = run_at.astimezone(UTC)
    if due < now:
        raise InvalidDispatch(f"{run_at.isoformat()} is in the past", field="runAt")
    if due - now > MAX_DELAY:
        raise InvalidDispatch(f"must be within {MAX_DELAY.days} days", field="runAt")
    return due
