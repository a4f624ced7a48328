"""Why a queued run is not running yet: no live worker runs the version it started on
(``no_worker_for_version``), or a limit of runs in flight holds it back, its agent's or its
tenant's (``limit``). What a submission's view and the sessions list show as its waiting
reason (docs/limits.md, docs/versions.md)."""

from __future__ import annotations

from dataclasses import dataclass

from tether.engine._context import EngineContext
from tether.engine._limits import LIMIT, LimitGate
from tether.engine._rollout import NO_WORKER_FOR_VERSION, live_workers, waits_for_a_worker
from tether.store import HeldBack, Submission, SubmissionStatus, WorkerRow

__all__ = ("QueuedWait", "QueuedWaits")


@dataclass(frozen=True, slots=True)
class QueuedWait:
    """What a queued run waits for: ``reason`` is ``no_worker_for_version`` or ``limit``,
    ``held_by`` whose limit (``agent`` or ``tenant``) for the latter."""

    reason: str
    held_by: str | None = None


class QueuedWaits:
    """Tells why queued runs wait, for one read (a submission, a page of sessions): the live
    workers and the limits' holds are each read once, when a queued run first needs them."""

    def __init__(self, context: EngineContext) -> None:
        self._context = context
        self._workers: list[WorkerRow] | None = None
        self._held: HeldBack | None = None
        self._held_read = False

    async def of(self, submission: Submission) -> QueuedWait | None:
        """What ``submission`` waits for, if it is queued and something holds it; ``None``
        when it is not queued, or only waits for a worker's next claim."""
        if submission.status is not SubmissionStatus.QUEUED:
            return None
        context = self._context
        if context.capabilities.versions is not None:
            if self._workers is None:
                self._workers = await live_workers(context)
            if waits_for_a_worker(submission, self._workers):
                return QueuedWait(NO_WORKER_FOR_VERSION)
        if not self._held_read:
            self._held = await context.limits.held_back()
            self._held_read = True
        held_by = LimitGate.held_by(self._held, submission)
        return None if held_by is None else QueuedWait(LIMIT, held_by)
