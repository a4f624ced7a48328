"""A submission's :class:`Budget`: limits on model calls, tokens, cost, tool calls and wall
time (docs/budgets.md), as a dispatch carries it on the wire.

Its home is here, below every layer, so the engine, which counts and enforces it
(``tether.engine``), and the light wire models (:mod:`tether.wire`) share one definition.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, WithJsonSchema

from tether._wire import WireModel

__all__ = ("Budget", "Seconds")

_N = TypeVar("_N", int, float, timedelta)


def _no_text(value: Any) -> Any:
    """A duration on the wire is a number of seconds, never an ISO 8601 string."""
    if isinstance(value, str | bytes):
        raise ValueError("a duration is a number of seconds")
    return value


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError("a duration is not negative")
    return value


Seconds = Annotated[
    timedelta,
    BeforeValidator(_no_text),
    AfterValidator(_not_negative),
    PlainSerializer(lambda value: value.total_seconds(), return_type=float),
    WithJsonSchema({"type": "number", "minimum": 0}),
]
"""A duration: a ``timedelta`` (or seconds) in Python, a number of seconds on the wire."""


class Budget(WireModel):
    """Limits on what one submission may spend; ``None`` is no limit. On the wire (a
    dispatch's ``budget``) the names are camelCase: ``modelCalls``, ``tokens``, ``costUsd``,
    ``toolCalls``, ``wallTime`` (seconds). ``tokens`` counts input and output tokens; a child
    submission's calls count against its parent. ``wall_time`` is the time since the
    submission's first execution started, less the time it waited for a person (a
    ``timedelta``, or seconds).

    Example::

        Budget(model_calls=5, tokens=20_000, cost_usd=0.5, tool_calls=10, wall_time=600)
    """

    model_calls: int | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    tool_calls: int | None = Field(default=None, ge=0)
    wall_time: Seconds | None = None
    """Seconds on the wire (a number); ``timedelta`` or seconds in Python."""
    on_exhausted: Literal["settle", "park"] | None = None
    """What a run does when a limit is used up: ``settle`` (the default) settles it
    ``failed`` with ``budget_exhausted``; ``park`` parks it on a ``budget`` gate, for a person
    to extend the budget (approve) or end the run (reject)."""

    def extended(self, extension: Budget) -> Budget:
        """This budget with each limit raised by ``extension``'s (a limit it leaves unset
        stays unlimited)."""

        def plus(limit: _N | None, more: _N | None) -> _N | None:
            return limit if limit is None or more is None else limit + more

        return self.model_copy(
            update={
                "model_calls": plus(self.model_calls, extension.model_calls),
                "tokens": plus(self.tokens, extension.tokens),
                "cost_usd": plus(self.cost_usd, extension.cost_usd),
                "tool_calls": plus(self.tool_calls, extension.tool_calls),
                "wall_time": plus(self.wall_time, extension.wall_time),
            }
        )

    def over(self, fallback: Budget | None) -> Budget:
        """This budget, each limit it leaves unset taken from ``fallback``."""
        if fallback is None:
            return self
        return Budget(
            model_calls=_first(self.model_calls, fallback.model_calls),
            tokens=_first(self.tokens, fallback.tokens),
            cost_usd=_first(self.cost_usd, fallback.cost_usd),
            tool_calls=_first(self.tool_calls, fallback.tool_calls),
            wall_time=_first(self.wall_time, fallback.wall_time),
            on_exhausted=self.on_exhausted or fallback.on_exhausted,
        )

    @property
    def unlimited(self) -> bool:
        return (
            self.model_calls is None
            and self.tokens is None
            and self.cost_usd is None
            and self.tool_calls is None
            and self.wall_time is None
        )


def _first(value: _N | None, fallback: _N | None) -> _N | None:
    return fallback if value is None else value
