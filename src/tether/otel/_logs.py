"""Log records with the trace they belong to: a filter that adds ``trace_id`` and ``span_id``.

A record logged while a span is current (inside an attempt, a model call, a tool call) gets
that span's ids. One logged outside any span but about a submission (it has a
``submission_id`` field, as the engine's event lines do: a settlement is logged after its
attempt's span ended) gets its submission's trace: the ``trace_id`` it was logged with (the
trace the submission was dispatched in), else the one :class:`~tether.otel.OtelInterceptor`
derives from its id, which every attempt of it is in.
"""

from __future__ import annotations

import logging

from opentelemetry import trace

from tether.otel._semconv import submission_ids

__all__ = ("TraceLogFilter",)


class TraceLogFilter(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` (lowercase hex, as W3C ``traceparent`` writes them)
    to each record it sees, and lets every record through. ``tether serve --otlp-endpoint``
    puts it on its log handler; an application that traces puts it on its own.

    Example::

        handler = logging.StreamHandler()
        handler.addFilter(TraceLogFilter())
        logging.getLogger("tether").addHandler(handler)
    """

    def filter(self, record: logging.LogRecord) -> bool:
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            record.trace_id = f"{span.trace_id:032x}"
            record.span_id = f"{span.span_id:016x}"
            return True
        submission_id = getattr(record, "submission_id", None)
        if (
            isinstance(submission_id, str)
            and submission_id
            and not getattr(record, "trace_id", None)
        ):
            record.trace_id = f"{submission_ids(submission_id)[0]:032x}"
        return True
