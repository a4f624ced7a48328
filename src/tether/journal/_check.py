"""The deploy gate's check of one log (:meth:`Journal.check`): what replaying it against a
new version found (:class:`ReplayCheck`), and the signal a pending execution's replay stops
at (:class:`PrefixEnd`).

A completed execution is replayed as :meth:`Journal.replay` replays it. The pending one (the
execution a resume would continue: parked on an approval, an input or its children, or cut
by a crash) is replayed over its recorded prefix only: where a resume would go live (the
harness asks for an effect the log does not hold, or reaches a recorded call that has no
answer yet), the new code has made every recorded effect, so the resume can go on.
"""

from __future__ import annotations

from dataclasses import dataclass

from tether.errors import JournalError, ReplayDiverged

__all__ = ("PrefixEnd", "ReplayCheck")


@dataclass(frozen=True, slots=True)
class ReplayCheck:
    """What :meth:`Journal.check` found: how many ``executions`` it replayed (the completed
    ones, then the pending one; the one that diverged counts), whether a run would resume
    the log (``pending``: its last execution never ended, and nothing settled its
    submission), and the first divergence (``None``: the code makes every recorded effect).

    Example::

        check = await journal.check(harness, versioning=Versioning("v2", pins))
        if check.diverged is not None and check.pending:
            print(f"a resume would fail at seq {check.diverged.seq}: {check.diverged.differs}")
    """

    executions: int
    pending: bool
    diverged: ReplayDiverged | None = None

    @property
    def compatible(self) -> bool:
        """Whether the code makes every recorded effect."""
        return self.diverged is None


class PrefixEnd(JournalError):
    """The check of a pending execution reached the end of its recorded effects: the code
    asked for what a resume would do live. Not an error: the check stops there, and the
    execution is compatible. It never leaves :meth:`Journal.check` (so it is not one of
    ``tether.errors``)."""

    code = "prefix_end"
