"""What a journaled Agents SDK run shares with the runs nested in it.

A guardrail, a dynamic instruction, a handoff filter or a hook may call ``Runner.run`` on an
agent of its own (a checker agent). Those runs are part of the durable run: their model calls
must be journaled too. The journaling runner (``_runner``) finds the enclosing run's scope
here, in a context variable that a journaled tool clears while it executes (a tool's whole
result is journaled, so what runs inside it is not journaled again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from tether.errors import TetherError
from tether.journal import ToolPolicy

__all__ = ("Scope", "current_scope", "outside_scope", "scope_of", "set_scope", "within")

_ATTRIBUTE = "_tether_scope"


@dataclass
class Scope:
    """One journaled agent graph: where its tools' control errors go, which tools are
    idempotent, the lock its guardrails take turns on, and the run settings nested runs
    inherit."""

    control: list[TetherError]
    idempotent: frozenset[str] = frozenset()
    policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    """Each function tool's :class:`~tether.journal.ToolPolicy`, by name (``"*"``: any
    other)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Guardrails run one at a time, in their list's order, so the journal records their
    model calls in the same order live, on resume and in replay."""
    serial_tools: bool = False
    """A function tool of the graph has tool guardrails: tools run one at a time."""
    tracing_disabled: bool = True
    responses: dict[str, list[Any]] = field(default_factory=dict)
    """Each response journaled in the run, by its id: the conversation it closes, as SDK
    input items (its input, the input it continued, its output). A call naming one as its
    ``previous_response_id`` continues that, resolved here rather than by the provider."""


_current: ContextVar[Scope | None] = ContextVar("tether_openai_agents_scope", default=None)


def current_scope() -> Scope | None:
    """The scope of the journaled run this code runs in (``None`` outside one, or inside a
    journaled tool)."""
    return _current.get()


@contextlib.contextmanager
def within(scope: Scope | None) -> Iterator[None]:
    token = _current.set(scope)
    try:
        yield
    finally:
        _current.reset(token)


def outside_scope() -> contextlib.AbstractContextManager[None]:
    """While a journaled tool executes: nested runs are part of the tool's journaled result."""
    return within(None)


def set_scope(agent: Any, scope: Scope) -> None:
    """Mark ``agent`` as a journaled clone of ``scope``'s graph."""
    object.__setattr__(agent, _ATTRIBUTE, scope)


def scope_of(agent: object) -> Scope | None:
    """The scope of a journaled clone (``None`` for an agent of the user's own)."""
    scope = getattr(agent, _ATTRIBUTE, None)
    return scope if isinstance(scope, Scope) else None
