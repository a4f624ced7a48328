"""What the runtime's admission and reads answer: a dispatch's receipt, a submission with its
attempts and children, and the ways a dispatch may meet a busy session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tether.store import Attempt, Submission, SubmissionStatus

__all__ = ("Multitask", "Receipt", "SubmissionInfo")

Multitask = Literal["enqueue", "reject", "interrupt", "steer"]
"""What a dispatch does if its session is busy (see :meth:`Runtime.dispatch`)."""


@dataclass(frozen=True, slots=True)
class Receipt:
    """What a dispatch returns; ``created`` is false for an idempotent replay."""

    submission_id: str
    conversation_id: str
    session: str
    created: bool = True


@dataclass(frozen=True, slots=True)
class SubmissionInfo:
    """A submission as stored, its attempts in start order, and the child submissions its
    task calls spawned (in spawn order)."""

    submission: Submission
    attempts: list[Attempt]
    children: list[Submission] = field(default_factory=list)
    waits_for_a_worker: bool = False
    """Queued, but no live worker runs the version it started on (``no_worker_for_version``):
    it runs once one does (docs/versions.md)."""
    waits_for_a_limit: bool = False
    """Queued, and held back by a limit: its agent's or its tenant's runs in flight are at
    their ``concurrency`` (the waiting reason ``limit``, docs/limits.md)."""
    held_by: str | None = None
    """Whose limit holds it back, when it waits for one: ``agent`` (its agent's, checked
    first) or ``tenant`` (its tenant's)."""

    @property
    def status(self) -> SubmissionStatus:
        return self.submission.status

    @property
    def settlement(self) -> Mapping[str, Any] | None:
        return self.submission.settlement
