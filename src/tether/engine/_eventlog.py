"""The runtime's own observer: what an operator reads in the server log.

Takeovers and every other recovery decision, approval decisions (and who made them), answers,
the resumes of parked runs they lead to and settlements that did not succeed are logged at
INFO on ``tether.engine.events``, each line with the ids to look the work up by (and the same
ids as ``extra`` fields, for structured handlers). Successful settlements are logged at
DEBUG: at INFO a busy server would log one line per message.
"""

from __future__ import annotations

import logging
from typing import Any

from tether.engine._observe import (
    ApprovalDecidedEvent,
    Correlation,
    EngineEvent,
    InputAnsweredEvent,
    RecoveryDecided,
    SubmissionResumed,
    SubmissionSettledEvent,
)

__all__ = ("log_event", "logger")

logger = logging.getLogger("tether.engine.events")


def log_event(event: EngineEvent) -> None:
    """An :data:`~tether.engine.Observer` that logs the events an operator needs."""
    if isinstance(event, RecoveryDecided):
        detail = f" ({event.detail})" if event.detail else ""
        _log(logging.INFO, event.correlation, f"recovery {event.decision}{detail}")
    elif isinstance(event, ApprovalDecidedEvent):
        reason = f": {event.reason}" if event.reason else ""
        _log(
            logging.INFO,
            event.correlation,
            f"approval {event.approval_id} decided {event.decision} by {event.approver}{reason}",
            approval_id=event.approval_id,
        )
    elif isinstance(event, InputAnsweredEvent):
        _log(
            logging.INFO,
            event.correlation,
            f"input {event.input_id} answered by {event.responder}",
            input_id=event.input_id,
        )
    elif isinstance(event, SubmissionResumed):
        _log(logging.INFO, event.correlation, f"resume {_after(event)}")
    elif isinstance(event, SubmissionSettledEvent):
        settlement = event.settlement
        status = settlement.get("status")
        if status == "succeeded":
            _log(logging.DEBUG, event.correlation, "settled succeeded")
            return
        code = settlement.get("errorCode") or settlement.get("error_code")
        error = settlement.get("error")
        because = f" [{code}]" if code else ""
        _log(logging.INFO, event.correlation, f"settled {status}{because}: {error}")


def _after(event: SubmissionResumed) -> str:
    if event.reason == "approval":
        return f"after approval {event.gate_id} was decided"
    if event.reason == "input":
        return f"after input {event.gate_id} was answered"
    return f"with the answers of children {', '.join(event.children)}"


def _log(level: int, correlation: Correlation, message: str, **ids: Any) -> None:
    if not logger.isEnabledFor(level):
        return
    fields = {
        "submission_id": correlation.submission_id or None,
        "conversation_id": correlation.conversation_id,
        "session": str(correlation.session_key),
        "attempt_id": correlation.attempt_id,
        **ids,
    }
    shown = " ".join(
        f"{name.removesuffix('_id')}={value}"
        for name, value in fields.items()
        if value is not None and name != "approval_id"
    )
    logger.log(level, "%s %s", message, shown, extra=fields)
