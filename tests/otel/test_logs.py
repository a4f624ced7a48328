"""Log records with their trace: :class:`tether.otel.TraceLogFilter`, in a span and outside."""

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from tether.demo import demo_agents
from tether.otel import OtelInterceptor, TraceLogFilter

from .test_otlp import derived

Make = Callable[..., Any]
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("tether.test", logging.INFO, __file__, 1, "hello", (), None)
    for name, value in extra.items():
        setattr(record, name, value)
    return record


def test_a_record_in_a_span_gets_its_trace_and_span_ids() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        record = _record(submission_id="S")  # the span says where it is, not the submission
        assert TraceLogFilter().filter(record)
    context = span.get_span_context()
    assert vars(record)["trace_id"] == f"{context.trace_id:032x}"
    assert vars(record)["span_id"] == f"{context.span_id:016x}"


def test_outside_a_span_a_submission_has_its_own_trace_and_others_none() -> None:
    about = _record(submission_id="01SUBMISSION")
    given = _record(submission_id="01SUBMISSION", trace_id=TRACE_ID)
    other = _record()
    for record in (about, given, other):
        assert TraceLogFilter().filter(record)
    assert vars(about)["trace_id"] == derived("01SUBMISSION")[0]
    assert not hasattr(about, "span_id")
    assert vars(given)["trace_id"] == TRACE_ID  # the trace it was dispatched in
    assert not hasattr(other, "trace_id")


@pytest.mark.parametrize("dispatched_in_a_trace", [False, True])
async def test_the_settlement_line_names_the_trace_of_its_attempts(
    make_runtime: Make, caplog: pytest.LogCaptureFixture, dispatched_in_a_trace: bool
) -> None:
    interceptor = OtelInterceptor(TracerProvider().get_tracer("test"))
    caplog.set_level(logging.DEBUG, logger="tether.engine.events")
    caplog.handler.addFilter(TraceLogFilter())
    trace = {"traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01"}
    async with make_runtime(demo_agents(), interceptors=[interceptor]) as runtime:
        receipt = await runtime.dispatch(
            "assistant", "me", "hello", trace=trace if dispatched_in_a_trace else None
        )
        async with asyncio.timeout(60):
            await runtime.wait(receipt.submission_id)
    [settled] = [r for r in caplog.records if r.getMessage().startswith("settled succeeded")]
    expected = TRACE_ID if dispatched_in_a_trace else derived(receipt.submission_id)[0]
    assert vars(settled)["trace_id"] == expected
    assert vars(settled)["submission_id"] == receipt.submission_id
