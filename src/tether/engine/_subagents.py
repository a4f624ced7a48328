"""Which agents may delegate to which (docs/architecture.md §6), and how far.

An agent absent from the policy gets no task tool. At the depth limit (1 by default: the
children of a root submission) an agent gets none either, so a cycle of delegation cannot
be built, whatever the policy says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ("SubagentLimits", "SubagentPolicy")


@dataclass(frozen=True, slots=True)
class SubagentLimits:
    """Bounds on delegation. ``max_children_per_run``: task calls one run may make (those
    past it get an error result at once, never a wait); ``max_depth``: how deep children
    nest (a root submission is depth 0); ``max_total``: how many submissions one root
    submission's whole tree may spawn, at every depth (a task call past it gets an error
    result at once; the store counts in each admission's commit, so the bound holds across
    processes, crashes and children spawning at once; ``None``: unbounded); ``max_wait``:
    seconds a parent waits for its children before an error outcome lands and they are
    cancelled (``None``: unbounded).

    Example::

        Runtime(agents, store, subagents={"triage": ["researcher"]},
                subagent_limits=SubagentLimits(max_children_per_run=4, max_wait=600))
    """

    max_children_per_run: int = 8
    max_depth: int = 1
    max_wait: float | None = None
    max_total: int | None = 100

    def __post_init__(self) -> None:
        if self.max_children_per_run < 1:
            raise ValueError("max_children_per_run must be at least 1")
        if self.max_depth < 1:
            raise ValueError("max_depth must be at least 1")
        if self.max_total is not None and self.max_total < 1:
            raise ValueError("max_total must be at least 1, or None")
        if self.max_wait is not None and not self.max_wait > 0:
            raise ValueError("max_wait must be a positive number of seconds, or None")


@dataclass(frozen=True, slots=True)
class SubagentPolicy:
    """The agents each agent may spawn, checked against the registered agents once."""

    spawns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    limits: SubagentLimits = field(default_factory=SubagentLimits)

    @classmethod
    def of(
        cls,
        spawns: Mapping[str, Sequence[str]],
        limits: SubagentLimits,
        agents: Sequence[str],
    ) -> SubagentPolicy:
        """The policy for these registered ``agents``; ``ValueError`` names any agent the
        map mentions that is not registered."""
        known = set(agents)
        for parent, children in spawns.items():
            if isinstance(children, str):
                raise ValueError(f"subagents[{parent!r}] must be a list of agent names")
            unknown = [name for name in (parent, *children) if name not in known]
            if unknown:
                raise ValueError(
                    f"subagents names agents that are not registered: {', '.join(unknown)}"
                )
        frozen = {parent: tuple(dict.fromkeys(children)) for parent, children in spawns.items()}
        return cls(MappingProxyType(frozen), limits)

    def targets(self, agent: str, depth: int) -> tuple[str, ...]:
        """What a run of ``agent`` at ``depth`` may delegate to: nothing past the depth
        limit, or for an agent the policy does not name."""
        if depth >= self.limits.max_depth:
            return ()
        return self.spawns.get(agent, ())
