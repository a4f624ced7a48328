"""Retention policies: how long sessions are kept, and how much of each log
(docs/retention.md). What applies them is :mod:`._pruner`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

__all__ = ("Retention",)


@dataclass(frozen=True, slots=True)
class Retention:
    """How long sessions are kept, and how much of each log.

    ``erase_after_idle``: erase a session whose last record is older (``None``: keep it).
    ``keep_records``: cut a log's head once it holds more than this by a quarter, keeping at
    least this many of its latest records (``None``: keep every record). ``agents``: a
    policy per agent name, which replaces this one for that agent's sessions. ``every``: how
    often a worker's pruner makes a pass. ``memory_after_idle``: erase long-term memory items
    (``tether.Memory``) not put again for longer than this (``None``: keep them; read from
    the runtime's policy only, as memory belongs to no agent's session).

    Example::

        runtime = Runtime(
            agents,
            "sqlite:///./tether-data",
            retention=Retention(
                erase_after_idle=timedelta(days=30),
                keep_records=10_000,
                agents={"audit": Retention()},  # the audit agent keeps everything
            ),
        )
    """

    erase_after_idle: timedelta | None = None
    keep_records: int | None = None
    agents: Mapping[str, Retention] = field(default_factory=dict)
    every: timedelta = timedelta(hours=1)
    memory_after_idle: timedelta | None = None

    def __post_init__(self) -> None:
        if self.erase_after_idle is not None and self.erase_after_idle <= timedelta(0):
            raise ValueError("erase_after_idle must be positive (None keeps sessions)")
        if self.keep_records is not None and self.keep_records < 1:
            raise ValueError("keep_records must be at least 1 (None keeps every record)")
        if self.memory_after_idle is not None and self.memory_after_idle <= timedelta(0):
            raise ValueError("memory_after_idle must be positive (None keeps memory)")
        if self.every <= timedelta(0):
            raise ValueError("every must be positive")

    def of(self, agent: str) -> Retention:
        """The policy for ``agent``'s sessions."""
        return self.agents.get(agent, self)

    @property
    def prunes(self) -> bool:
        """Whether this policy, or an agent's, would ever remove anything."""
        return self.memory_after_idle is not None or any(
            policy.erase_after_idle is not None or policy.keep_records is not None
            for policy in (self, *self.agents.values())
        )
