"""What a runtime depends on, and the state of each: what ``/readyz`` reports.

The store must take a write; a worker on a store that offers liveness locks must hold its
own (without it a crash is taken over only after a lease, and a peer cannot tell it alive
from dead); an exporter the application configured (OTLP) says whether its last export went
through. Only what is ``required`` makes the node not ready: a collector that is down loses
telemetry, not work.

Example::

    for dependency in await runtime.readiness():
        print(dependency.name, dependency.state, dependency.required)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = ("Dependency", "DependencyState", "HealthReporter")

DependencyState = Literal["up", "down", "unknown"]


@dataclass(frozen=True, slots=True)
class Dependency:
    """One dependency's state: ``up``, ``down``, or ``unknown`` (nothing tried yet: an
    exporter before its first export). A ``required`` one that is not up makes the node not
    ready. ``detail`` is safe to show anyone (no path, no host)."""

    name: str
    state: DependencyState
    required: bool
    detail: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == "up" or not self.required


@runtime_checkable
class HealthReporter(Protocol):
    """A metric sink or interceptor that depends on something outside the process (an OTLP
    collector) says how it is: the runtime asks it for ``/readyz``."""

    def health(self) -> Dependency: ...
