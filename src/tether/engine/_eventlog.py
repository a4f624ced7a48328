"""The runtime's own observer: what an operator reads in the server log.

Takeovers and every other recovery decision, approval decisions (and who made them), answers,
the resumes of parked runs they lead to, settlements that did not succeed (an abort's with
who aborted it) and erased sessions (with who erased them: nothing else keeps it) are logged
at INFO on ``tether.engine.events``, each line with the ids to look the work up by (and the
same ids as ``extra`` fields, for structured handlers: ``submission_id``, ``conversation_id``,
``session``, ``attempt_id``, and ``trace_id`` when the submission was dispatched in a
trace). Successful settlements are logged at DEBUG: at INFO a busy server would log one line
per message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
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
from tether.records import Actor
from tether.store import ErasedSession

__all__ = ("log_erased", "log_event", "logger")

logger = logging.getLogger("tether.engine.events")
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


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
        by = settlement.get("abortedBy")
        who = f" (aborted by {by.get('subject')})" if isinstance(by, dict) else ""
        _log(logging.INFO, event.correlation, f"settled {status}{because}: {error}{who}")


def log_erased(erased: ErasedSession, by: Actor | None, tenant: str | None) -> None:
    """Log an erased session, with who erased it (``subject``, ``tenant``: ``None`` when no
    one authenticated did) and the session's tenant, as ``extra`` fields too: once erased,
    the store keeps nothing of it, so this line is the record of the erase."""
    fields = {
        "conversation_id": erased.conversation_id,
        "session": str(erased.key),
        "session_tenant": tenant,
        "subject": None if by is None else by.subject,
        "tenant": None if by is None else by.tenant,
    }
    who = "no one authenticated" if by is None else by.subject
    of = "" if by is None or by.tenant is None else f" of {by.tenant}"
    logger.info(
        "session %s erased by %s%s (%d records, %d submissions) conversation=%s",
        erased.key,
        who,
        of,
        erased.records,
        erased.submissions,
        erased.conversation_id,
        extra=fields,
    )


def _after(event: SubmissionResumed) -> str:
    if event.reason == "approval":
        return f"after approval {event.gate_id} was decided"
    if event.reason == "input":
        return f"after input {event.gate_id} was answered"
    return f"with the answers of children {', '.join(event.children)}"


def _trace_id(trace: Mapping[str, str] | None) -> str | None:
    """The trace id of the W3C ``traceparent`` a submission was dispatched with, if any."""
    match = _TRACEPARENT.match((trace or {}).get("traceparent", ""))
    return None if match is None or not match[1].strip("0") else match[1]


def _log(level: int, correlation: Correlation, message: str, **ids: Any) -> None:
    if not logger.isEnabledFor(level):
        return
    fields = {**correlation.log_fields(), **ids}
    shown = " ".join(
        f"{name.removesuffix('_id')}={value}"
        for name, value in fields.items()
        if value is not None and name != "approval_id"
    )
    fields["trace_id"] = _trace_id(correlation.trace)
    logger.log(level, "%s %s", message, shown, extra=fields)
