"""The LangGraph adapter's refusals: at registration (``UnsupportedConstruct``) and during a
run (``NotJournaled``, kept for the run so that a node that catches it still fails it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import NoReturn

from tether import errors

__all__ = ("NotJournaled", "Refusals", "UnsupportedConstruct", "refusals", "refuse")


class UnsupportedConstruct(errors.UnsupportedConstruct):
    """The graph uses a LangGraph construct whose effects or state would escape Tether's
    journal; raised when the agent is defined, naming the construct and what to do instead.

    Example::

        try:
            durable(lambda model, tools: graph.compile(checkpointer=saver), model=m, name="a")
        except UnsupportedConstruct as exc:
            print(exc)  # the graph is compiled with a checkpointer: Tether's log is ...
    """


class NotJournaled(errors.NotJournaled):
    """Something in a LangGraph run cannot be kept by the journal: a state value or an
    interrupt value that is not JSON, a model, tool or retriever call made outside the
    journaled stand-ins, a tool that interrupts or answers with a ``Command``. Raised
    (failing the run) rather than letting a resume or a replay see something else.

    Example::

        # a node returned {"when": datetime.now()}
        NotJournaled: state channel 'when' holds a datetime, which the journal cannot keep ...
    """


class Refusals:
    """The first refusal of a run: raised again once the graph returns, whatever caught it."""

    def __init__(self) -> None:
        self.first: NotJournaled | None = None

    def check(self) -> None:
        if self.first is not None:
            raise self.first


_current: ContextVar[Refusals | None] = ContextVar("tether_langgraph_refusals", default=None)


@contextlib.contextmanager
def refusals() -> Iterator[Refusals]:
    """Collect the refusals of the run this block drives."""
    kept = Refusals()
    token = _current.set(kept)
    try:
        yield kept
    finally:
        _current.reset(token)


def refuse(message: str) -> NoReturn:
    """Raise ``NotJournaled(message)``, kept as the run's refusal if it is its first."""
    error = NotJournaled(message)
    kept = _current.get()
    if kept is not None and kept.first is None:
        kept.first = error
    raise error
