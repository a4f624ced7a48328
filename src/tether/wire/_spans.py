"""What ``GET /conversations/{id}/spans`` answers: each execution, model call and tool call
derived from a log, with where it starts and ends in the log."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from tether.wire._base import TIMESTAMP, WireResponse, optional
from tether.wire._submissions import UsageView

__all__ = (
    "SpanKind",
    "SpanStatus",
    "SpanView",
    "SpansPage",
)


SpanKind = Literal["execution", "model", "tool"]


SpanStatus = Literal["open", "ok", "error", "denied", "unknown", "failed", "interrupted"]


class SpanView(WireResponse):
    """One execution, model call or tool call, as the log recorded it."""

    kind: SpanKind
    name: str = Field(description="The harness, the model, or the tool.")
    submission_id: str | None = optional()
    execution_id: str | None = optional()
    call_id: str | None = optional()
    start_seq: int
    end_seq: int | None = optional(description="Absent while the span is open.")
    started_at: str = Field(**TIMESTAMP)
    ended_at: str | None = optional(**TIMESTAMP)
    duration_ms: float | None = optional()
    status: SpanStatus = Field(
        description="open (no end yet), ok, error, denied or unknown (a tool's outcome), "
        "failed (an execution), interrupted (a model's stream a crash cut)."
    )
    error: str | None = optional()
    usage: UsageView | None = optional(description="A model call's.")
    approval_id: str | None = optional(description="A gated tool call's approval.")
    decision: str | None = optional(description="approve, reject or edit, once decided.")
    approver: str | None = optional()
    child_submission_id: str | None = optional(description="A task call's child.")
    child_conversation_id: str | None = optional()
    child_stream_url: str | None = optional()


class SpansPage(WireResponse):
    """Spans in the order they started; ``next`` is the ``after`` of the next page (null
    when the log holds no more)."""

    conversation_id: str
    spans: list[SpanView]
    next: int | None
