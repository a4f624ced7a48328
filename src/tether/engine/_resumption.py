"""What resuming a pending execution is, for observers and the server log: a parked run woken
by what it waited for, or a run cut short and recovered."""

from __future__ import annotations

from tether.engine._delegation import children_awaited
from tether.engine._observe import Correlation, EngineEvent, RecoveryDecided, SubmissionResumed
from tether.journal import Execution
from tether.records import ApprovalDecided, InputAnswered, VersionChanged
from tether.store import WAIT_FOR_CHILDREN

__all__ = ("resume_events",)


def resume_events(correlation: Correlation, execution: Execution) -> list[EngineEvent]:
    """The event for resuming ``execution`` (started, not ended). A run parked on a gate ends
    its log with the decision or the answer that requeued it, and one parked on its children
    has task calls still waiting: each is an ordinary :class:`SubmissionResumed`. Anything
    else was cut short (a crash, a lost lease, a transient error) and its resume is a
    recovery (``RecoveryDecided(decision="resume")``, the execution id as its detail)."""
    waited = children_awaited(execution.effects)
    # An operator's version change lands after the decision it does not replace.
    last = next(
        (r.payload for r in reversed(execution.effects) if r.kind != VersionChanged.KIND), None
    )
    if isinstance(last, ApprovalDecided):
        return [SubmissionResumed(correlation, "approval", last.approval_id, waited)]
    if isinstance(last, InputAnswered):
        return [SubmissionResumed(correlation, "input", last.input_id, waited)]
    if waited:
        return [SubmissionResumed(correlation, WAIT_FOR_CHILDREN, children=waited)]
    return [RecoveryDecided(correlation, decision="resume", detail=execution.id)]
