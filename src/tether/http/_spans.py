"""Spans derived from a log: each execution, model call and tool call with where it starts
and ends in the log, its times and what it came to (``GET /conversations/{id}/spans``).

Nothing here is stored: a span is read off the records that open and close it, so the same
log always gives the same spans. An execution runs from ``execution_started`` to
``execution_ended`` or ``execution_failed``; a model call from ``model_called`` (or, for a
stream a crash cut and the model was asked again, ``assistant_message_started``) to
``assistant_message_completed``; a tool call from ``tool_called`` to ``tool_outcome``, with the
approval it waited for and the child a task call spawned.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tether.http._responses import stream_url
from tether.messages import Usage
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    AssistantMessageStarted,
    ExecutionEnded,
    ExecutionFailed,
    ExecutionStarted,
    ModelCalled,
    Record,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
)
from tether.store import SessionKey
from tether.wire import SpanKind, SpanStatus, SpanView, UsageView

__all__ = ("SpanBuilder",)


_KINDS = frozenset(
    {
        ExecutionStarted.KIND,
        ExecutionEnded.KIND,
        ExecutionFailed.KIND,
        ModelCalled.KIND,
        AssistantMessageStarted.KIND,
        AssistantMessageCompleted.KIND,
        ToolCalled.KIND,
        ApprovalRequested.KIND,
        ApprovalDecided.KIND,
        TaskSpawned.KIND,
        ToolOutcome.KIND,
    }
)
"""The kinds that open, close or annotate a span: the rest (deltas above all) are skipped
without decoding their payloads."""


_OUTCOMES: dict[str, SpanStatus] = {"ok": "ok", "error": "error", "denied": "denied"}
Key = tuple[SpanKind, str, str]
"""A span's kind, its execution id and its call id ("" for none)."""


def _usage(usage: Usage | None) -> UsageView | None:
    if usage is None:
        return None
    return UsageView(
        calls=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


@dataclass
class _Open:
    view: SpanView
    began: datetime


class SpanBuilder:
    """Feeds on records in seq order; ``spans`` are those that started after ``after``.

    Example::

        builder = SpanBuilder(after=0)
        for record in await runtime.records(conversation_id):
            builder.feed(record)
        print([(span.kind, span.name, span.duration_ms) for span in builder.spans])
    """

    def __init__(self, *, after: int) -> None:
        self.after = after
        self.spans: list[SpanView] = []
        self._open: dict[Key, _Open] = {}

    def feed(self, record: Record) -> None:
        if record.kind not in _KINDS:
            return
        payload = record.payload
        execution = record.execution_id or ""
        if isinstance(payload, ExecutionStarted):
            self._start(record, ("execution", execution, ""), payload.harness)
        elif isinstance(payload, ExecutionEnded):
            self._end(record, ("execution", execution, ""), "ok")
        elif isinstance(payload, ExecutionFailed):
            self._end(record, ("execution", execution, ""), "failed", error=payload.error)
        elif isinstance(payload, ModelCalled | AssistantMessageStarted):
            key: Key = ("model", execution, payload.call_id)
            if key not in self._open:  # a stream started again after a crash: a new span
                self._start(record, key, payload.model or "model")
        elif isinstance(payload, AssistantMessageCompleted):
            status: SpanStatus = "interrupted" if payload.interrupted else "ok"
            key = ("model", execution, payload.call_id)
            self._end(record, key, status, usage=_usage(payload.usage))
        elif isinstance(payload, ToolCalled):
            self._start(record, ("tool", execution, payload.call_id), payload.tool)
        elif isinstance(payload, ToolOutcome):
            status = _OUTCOMES.get(payload.status.value, "unknown")
            self._end(record, ("tool", execution, payload.call_id), status)
        elif isinstance(payload, ApprovalRequested | ApprovalDecided | TaskSpawned):
            opened = self._open.get(("tool", execution, payload.call_id))
            if opened is not None:
                _annotate(opened.view, payload)

    def _start(self, record: Record, key: Key, name: str) -> None:
        kind, _, call_id = key
        view = SpanView(
            kind=kind,
            name=name,
            submission_id=record.submission_id,
            execution_id=record.execution_id,
            call_id=call_id or None,
            start_seq=record.seq,
            started_at=record.time,
            status="open",
        )
        self._open[key] = _Open(view, datetime.fromisoformat(record.time))
        if record.seq > self.after:
            self.spans.append(view)

    def _end(
        self,
        record: Record,
        key: Key,
        status: SpanStatus,
        *,
        error: str | None = None,
        usage: UsageView | None = None,
    ) -> None:
        opened = self._open.pop(key, None)
        if opened is None:
            return  # it opened before the first record read
        view = opened.view
        view.end_seq = record.seq
        view.ended_at = record.time
        ended = datetime.fromisoformat(record.time)
        view.duration_ms = round((ended - opened.began).total_seconds() * 1000, 3)
        view.status = status
        view.error = error
        view.usage = usage


def _annotate(view: SpanView, payload: ApprovalRequested | ApprovalDecided | TaskSpawned) -> None:
    """What a tool call waited for (an approval) or spawned (a task's child)."""
    if isinstance(payload, ApprovalRequested):
        view.approval_id = payload.approval_id
    elif isinstance(payload, ApprovalDecided):
        view.decision = payload.decision
        view.approver = payload.approver
    else:
        view.child_submission_id = payload.child_submission_id
        view.child_conversation_id = payload.child_conversation_id
        view.child_stream_url = stream_url(
            SessionKey(payload.agent, payload.instance, payload.session)
        )
