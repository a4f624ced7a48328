"""Where things stand, as the store keeps it and the wire says it: a submission's
:class:`SubmissionStatus`, a gate's :class:`GateStatus`, a session's :class:`SessionState`,
an outbound webhook delivery's :class:`WebhookStatus`, and a person's :data:`Decision` on an
approval.

Their home is here, below every layer, so the store, the engine and the light wire models
(:mod:`tether.wire`, which a client loads without the server) share one definition; each is
exported where it belongs (``tether.store``, ``tether.engine``, ``tether.journal``) and from
:mod:`tether.wire`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

__all__ = ("Decision", "GateStatus", "SessionState", "SubmissionStatus", "WebhookStatus")

Decision = Literal["approve", "reject", "edit"]


class SubmissionStatus(StrEnum):
    """Lifecycle of a submission: ``queued → running → terminalizing → settled``.

    A running submission may be released back to ``queued`` (retry, shutdown, lost lease)
    or parked in ``waiting`` (approval, child tasks, a timer) until it is woken. A delayed
    dispatch (``NewSubmission.run_at``) is admitted ``scheduled`` and becomes ``queued`` at
    its time (or at once when a cancel is requested).
    """

    SCHEDULED = "scheduled"
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    TERMINALIZING = "terminalizing"
    SETTLED = "settled"


class GateStatus(StrEnum):
    """Where a gate stands: ``pending`` (waits for a human), ``decided`` (a human decided
    it: approve, reject or edit; an input gate's ``answer``), ``closed`` (its submission
    settled before anyone did)."""

    PENDING = "pending"
    DECIDED = "decided"
    CLOSED = "closed"


class SessionState(StrEnum):
    """Where a session stands: something of it is queued or running, it waits (an approval,
    an answer, its children, its budget, a timer, a delayed dispatch at its head, a limit
    holding its queued head back, a worker of its version), its last submission failed, or
    it is at rest. ``SessionInfo.wait_reason`` says what it waits for."""

    IDLE = "idle"
    RUNNING = "running"
    WAITING = "waiting"
    FAILED = "failed"


class WebhookStatus(StrEnum):
    """Where a delivery stands: ``held`` (a subscription's settlement, until its submission
    settles), ``pending`` (due at ``next_attempt_at``, or being attempted: a claim moves that
    time past the attempt's lease), ``delivered`` (a 2xx answer), ``failed`` (every attempt
    failed; a resend makes it ``pending`` again), ``closed`` (a subscription's watch whose
    submission settled, not asked to tell of it: never sent).

    Example::

        failed = await store.list_webhook_deliveries(status=WebhookStatus.FAILED)
    """

    HELD = "held"
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    CLOSED = "closed"
