"""Tenant usage (capability ``usage``): what each tenant spent per UTC day, and the
reservations of the model calls in flight against its period budgets (docs/budgets.md).

Every backend adds a record's spending to its tenant's row for the record's day in the
transaction that appends the record (:func:`spends_of` says what a batch spends), so the
aggregate is exact across crashes: a record is durable with its spending or not at all. A
model call is counted by its completion (``assistant_message_completed``, not interrupted:
one call, its input plus output tokens, its ``cost`` as the journal priced it), a tool call
by its intent (``tool_called``, run by the host: ``host`` or ``approval`` mediation), each
once, as it is appended. A conversation of no tenant counts under none. A month is the sum
of its days.

A reservation holds one model call in flight (with, for the token and cost limits, as much
as the tenant's largest call of the periods asked), by its holder (a conversation, or a
worker's share): the append of the call's completion releases one of the conversation's in
the same transaction, or one of the holder the append names (``usage_holder``: a worker
that reserved a share of calls at once, :func:`share_of`); one whose worker died expires.
A holder's calls in flight at once are not told apart: a release gives back the one
holding least, so those left hold at least what the calls still in flight were granted (a
call reserved before midnight holds the day before's largest call, one after it nothing).
Every backend decides a reservation with :func:`decide` in one transaction serialized per
tenant; the in-memory store is the reference.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Final

from tether.messages import Mediation
from tether.records import AssistantMessageCompleted, Record, ToolCalled
from tether.store._common import record_time

__all__ = (
    "COMPLETED_KIND",
    "TOOL_KIND",
    "DaySpend",
    "UsageAsk",
    "UsageLease",
    "UsageLimit",
    "UsageRefusal",
    "UsageReserved",
    "UsageSpent",
    "check_usage_ask",
    "decide_usage",
    "held_by",
    "share_of",
    "spends_of",
)

COMPLETED_KIND: Final = AssistantMessageCompleted.KIND
TOOL_KIND: Final = ToolCalled.KIND
_COUNTED_TOOLS: Final = frozenset((Mediation.HOST, Mediation.APPROVAL))


@dataclass(frozen=True, slots=True)
class UsageSpent:
    """A tenant's spending over some days: model calls, tokens (input plus output), cost in
    US dollars (of the calls the journal could price), tool calls; and its largest single
    call's tokens and cost."""

    model_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    tool_calls: int = 0
    max_call_tokens: int = 0
    max_call_cost: float = 0.0

    def plus(self, other: UsageSpent) -> UsageSpent:
        return UsageSpent(
            self.model_calls + other.model_calls,
            self.tokens + other.tokens,
            self.cost_usd + other.cost_usd,
            self.tool_calls + other.tool_calls,
            max(self.max_call_tokens, other.max_call_tokens),
            max(self.max_call_cost, other.max_call_cost),
        )


@dataclass(frozen=True, slots=True)
class DaySpend:
    """What one append spends on one UTC ``day``; ``completions``: the model calls it
    completes (each releases one reservation of its conversation)."""

    day: date
    spent: UsageSpent
    completions: int


def spends_of(records: Iterable[Record]) -> list[DaySpend]:
    """What ``records`` spend, by the day of each record's time (a batch that spans midnight
    spends on both days); empty when they spend nothing (the common case costs a kind
    comparison per record)."""
    days: dict[str, tuple[UsageSpent, int]] = {}
    for record in records:
        kind = record.kind
        if kind == COMPLETED_KIND:
            completed = record.payload
            assert isinstance(completed, AssistantMessageCompleted)
            if completed.interrupted:
                continue
            usage = completed.usage
            tokens = 0 if usage is None else (usage.input_tokens or 0) + (usage.output_tokens or 0)
            cost = completed.cost or 0.0
            spent = UsageSpent(1, tokens, cost, 0, tokens, cost)
            calls = 1
        elif kind == TOOL_KIND:
            called = record.payload
            assert isinstance(called, ToolCalled)
            if called.mediation not in _COUNTED_TOOLS:
                continue
            spent, calls = UsageSpent(tool_calls=1), 0
        else:
            continue
        day = record_time(record.canonical)[:10]
        kept = days.get(day)
        days[day] = (spent, calls) if kept is None else (kept[0].plus(spent), kept[1] + calls)
    return [DaySpend(date.fromisoformat(day), spent, calls) for day, (spent, calls) in days.items()]


@dataclass(frozen=True, slots=True)
class UsageLimit:
    """A tenant's budget over the days ``start <= day < end`` (a UTC day or month): at most
    ``model_calls`` calls, ``tokens`` tokens, ``cost_usd`` dollars; ``None``: no limit."""

    start: date
    end: date
    model_calls: int | None = None
    tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class UsageAsk:
    """A reservation of one model call of ``tenant``'s (up to ``calls`` of them: a share,
    :func:`share_of`), by the ``holder`` that makes it (its conversation, or a worker's
    share that its appends name), under every one of ``limits``; it expires at
    ``expires_at`` unless its owner's heartbeat renews it
    (:meth:`~tether.store.UsageStore.renew_usage`)."""

    tenant: str
    holder: str
    owner_id: str
    expires_at: datetime
    limits: tuple[UsageLimit, ...]
    calls: int = 1


@dataclass(frozen=True, slots=True)
class UsageLease:
    """What ``UsageStore.lease_usage`` reserved: ``calls`` calls, each holding ``tokens``
    tokens and ``cost_usd`` dollars (the largest call of the periods asked so far)."""

    calls: int
    tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class UsageReserved:
    """The live reservations of a tenant: how many, and the tokens and cost they hold."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class UsageRefusal:
    """Why a reservation was refused: ``limits[index]`` of the ask has its ``limit``
    (``modelCalls``, ``tokens``, ``costUsd``) used up: ``used`` of ``max`` spent, and
    ``reserved`` in flight. ``waiting``: what is spent alone is under the limit (the calls in
    flight hold the rest, and may give some back): ask again once they end."""

    index: int
    limit: str
    used: float
    max: float
    spent: UsageSpent
    reserved: UsageReserved
    waiting: bool


def check_usage_ask(ask: UsageAsk) -> None:
    """``ValueError`` for an ask no backend can keep."""
    for value in (ask.tenant, ask.holder):
        if not value or "\x00" in value:
            raise ValueError("a usage reservation needs a tenant and a holder without NUL")
    if "\x00" in ask.owner_id:
        raise ValueError("an owner id has no NUL")
    if ask.expires_at.tzinfo is None:
        raise ValueError("datetimes given to a store must be timezone-aware")
    if ask.calls < 1:
        raise ValueError("a usage reservation asks for one call or more")
    for limit in ask.limits:
        if limit.end <= limit.start:
            raise ValueError("a usage limit's period ends after it starts")
        for most in (limit.model_calls, limit.tokens, limit.cost_usd):
            if most is not None and most < 0:
                raise ValueError("a usage limit is not negative")


def decide_usage(
    ask: UsageAsk, spents: Sequence[UsageSpent], reserved: UsageReserved
) -> UsageRefusal | None:
    """``None`` if ``ask`` may be granted (``spents[i]``: what was spent over
    ``ask.limits[i]``'s days): no limit's spending plus its reservations has reached it, so
    the model calls never go over, and the tokens and cost only by what the calls in flight
    spend beyond what they hold. Else the first limit used up."""
    for index, (limit, spent) in enumerate(zip(ask.limits, spents, strict=True)):
        checks: tuple[tuple[str, float | None, float, float], ...] = (
            ("modelCalls", limit.model_calls, spent.model_calls, reserved.calls),
            ("tokens", limit.tokens, spent.tokens, reserved.tokens),
            ("costUsd", limit.cost_usd, spent.cost_usd, reserved.cost_usd),
        )
        for name, most, used, held in checks:
            if most is not None and used + held >= most:
                shown = round(used, 6) if isinstance(used, float) else used
                return UsageRefusal(index, name, shown, most, spent, reserved, waiting=used < most)
    return None


def held_by(spents: Sequence[UsageSpent]) -> tuple[int, float]:
    """What a granted reservation holds: the largest call's tokens and cost over the
    periods asked."""
    return (
        max((s.max_call_tokens for s in spents), default=0),
        max((s.max_call_cost for s in spents), default=0.0),
    )


def share_of(
    ask: UsageAsk, spents: Sequence[UsageSpent], reserved: UsageReserved, hold: tuple[int, float]
) -> int:
    """How many calls a granted ``ask`` reserves (each holding ``hold``, :func:`held_by`): up
    to ``ask.calls``, and no more than half of what each limit has left for calls asked one at
    a time (at least the one granted), so that near a limit a share shrinks to single calls
    and one worker's share never holds all that is left. Under a token or cost limit with no
    call of its periods yet (a hold of nothing), one: there is nothing to size a share by."""
    granted = ask.calls
    tokens_hold, cost_hold = hold
    for limit, spent in zip(ask.limits, spents, strict=True):
        if granted <= 1:
            break
        if limit.model_calls is not None:
            left = limit.model_calls - spent.model_calls - reserved.calls
            granted = min(granted, max(1, left // 2))
        if (limit.tokens is not None and tokens_hold <= 0) or (
            limit.cost_usd is not None and cost_hold <= 0
        ):
            return 1
        if limit.tokens is not None:
            left = -(-(limit.tokens - spent.tokens - reserved.tokens) // tokens_hold)
            granted = min(granted, max(1, left // 2))
        if limit.cost_usd is not None:
            left = math.ceil((limit.cost_usd - spent.cost_usd - reserved.cost_usd) / cost_hold)
            granted = min(granted, max(1, left // 2))
    return max(1, granted)
