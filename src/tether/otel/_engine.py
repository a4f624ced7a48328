"""Engine work as OpenTelemetry spans: attempt → execution → model calls and tool calls.

An interceptor, so each span is *current* while its work runs: spans nest through the
context, and a provider SDK's own instrumentation lands under the model call that made it.
Only live work is traced; what a resume or replay serves from the log makes no span.

A park (:class:`~tether.errors.Parked`: an approval, children, anything the run waits for
outside itself) is not a failure: the spans it ends get a ``tether.parked`` event and keep
an unset status. Every attempt of a submission is in one trace: the caller's, or one whose
id is derived from the submission's (see ``docs/tracing.md``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from tether.engine import Operation
from tether.errors import ApprovalParked, ChildrenPending, InputParked, Parked
from tether.messages import ModelResponse, ToolResult
from tether.otel._semconv import finish_reason, model_identity, submission_ids
from tether.stream import tool_attributes

__all__ = ("PARKED_EVENT", "OtelInterceptor", "submission_parent")

PARKED_EVENT = "tether.parked"
"""The event on the spans a park ends (the status stays unset: waiting is not failing)."""

_PROPAGATOR = TraceContextTextMapPropagator()
_KINDS = {"turn": SpanKind.CLIENT}  # a model call goes out to a provider; the rest is in-process
_tool_names: ContextVar[dict[str, str] | None] = ContextVar("tether_otel_tool_names", default=None)
"""Within an attempt: the tool each call id the model asked for names (a park's event says it)."""


def submission_parent(submission_id: str) -> Context:
    """The parent of the attempts of a submission dispatched without a trace context: a
    remote span whose trace and span ids derive from the submission id, so that every
    attempt (a resume after an approval, a recovery after ``kill -9`` on another machine)
    is in the same trace without anything stored."""
    trace_id, span_id = submission_ids(submission_id)
    parent = SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))


class OtelInterceptor:
    """Pass to ``Runtime(..., interceptors=[OtelInterceptor()])``.

    Spans: ``invoke_agent {agent}`` per attempt, ``execution {exec|resume}`` inside it,
    ``chat {model}`` (kind CLIENT) per model call, with the provider, the response's model
    and id, ``gen_ai.usage.*`` tokens and the finish reason, and ``execute_tool {name}`` per
    tool call, all carrying ``tether.*`` correlation ids. An attempt joins the trace its
    submission was dispatched with (a ``traceparent``); without one, the submission's own
    trace, the same for all its attempts. A park ends its spans with a ``tether.parked``
    event, not an error. ``docs/tracing.md`` lists every span, attribute and event.

    Example::

        runtime = Runtime(agents, "sqlite:///./tether-data", interceptors=[OtelInterceptor()])
    """

    def __init__(self, tracer: Tracer | None = None) -> None:
        self.tracer = tracer or trace.get_tracer("tether")

    def current_trace_context(self) -> dict[str, str]:
        """The current span's W3C trace context: a child submission spawned here joins it."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        return carrier

    async def __call__(self, operation: Operation, call_next: Callable[[], Awaitable[Any]]) -> Any:
        name, attributes = _describe(operation)
        names = _tool_names.set({}) if operation.boundary == "attempt" else None
        try:
            with self.tracer.start_as_current_span(
                name,
                context=_parent(operation),
                kind=_KINDS.get(operation.boundary, SpanKind.INTERNAL),
                attributes=attributes,
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                try:
                    result = await call_next()
                except Parked as parked:
                    span.add_event(PARKED_EVENT, _parked_attributes(parked))
                    raise
                except BaseException as exc:
                    span.record_exception(exc)
                    span.set_attribute("error.type", type(exc).__qualname__)
                    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                    raise
                _annotate(span, result)
                return result
        finally:
            if names is not None:
                _tool_names.reset(names)


def _parent(operation: Operation) -> Context | None:
    """An attempt's parent is the dispatcher's span, else its submission's derived one;
    everything else nests in the current span."""
    if operation.boundary != "attempt":
        return None
    trace_context = operation.correlation.trace
    if trace_context:
        caller = _PROPAGATOR.extract(dict(trace_context))
        if trace.get_current_span(caller).get_span_context().is_valid:
            return caller
    return submission_parent(operation.correlation.submission_id)


def _describe(operation: Operation) -> tuple[str, dict[str, AttributeValue]]:
    c = operation.correlation
    attributes: dict[str, AttributeValue] = {
        "gen_ai.conversation.id": c.conversation_id,
        "tether.agent": c.session_key.agent,
        "tether.instance": c.session_key.instance,
        "tether.session": c.session_key.session,
        "tether.conversation_id": c.conversation_id,
        "tether.submission_id": c.submission_id,
    }
    if c.attempt_id is not None:
        attributes["tether.attempt_id"] = c.attempt_id
    if operation.boundary == "attempt":
        attributes |= {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": operation.name}
        return f"invoke_agent {operation.name}", attributes
    if operation.boundary == "turn":
        provider, model = model_identity(operation.name, operation.provider)
        attributes |= {"gen_ai.operation.name": "chat", "gen_ai.request.model": model}
        if provider is not None:
            attributes["gen_ai.provider.name"] = provider
        return f"chat {model}", attributes
    if operation.boundary == "tool":
        attributes |= tool_attributes(operation.name, operation.call_id or "")
        return f"execute_tool {operation.name}", attributes
    return f"execution {operation.name}", attributes


def _annotate(span: Span, result: object) -> None:
    if isinstance(result, ModelResponse):
        usage = result.usage
        if usage is not None:
            for key, value in (
                ("gen_ai.usage.input_tokens", usage.input_tokens),
                ("gen_ai.usage.output_tokens", usage.output_tokens),
                ("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens),
            ):
                if value is not None:  # not reported stays absent; a real 0 is kept
                    span.set_attribute(key, value)
        if result.finish_reason is not None:
            span.set_attribute(
                "gen_ai.response.finish_reasons", [finish_reason(result.finish_reason)]
            )
        if result.response_id is not None:
            span.set_attribute("gen_ai.response.id", result.response_id)
        if result.response_model is not None:
            span.set_attribute("gen_ai.response.model", result.response_model)
        names = _tool_names.get()
        if names is not None:
            names.update((call.call_id, call.name) for call in result.message.tool_calls)
    elif isinstance(result, ToolResult) and result.is_error:
        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR))


def _parked_attributes(parked: Parked) -> dict[str, AttributeValue]:
    """What a park waits for: the approval (its id, the call and, if this attempt saw the
    model ask for it, the tool), the task calls whose children have not settled, or the
    reason a park of another kind gives (its error code)."""
    attributes: dict[str, AttributeValue]
    if isinstance(parked, ApprovalParked):
        attributes = {
            "tether.parked.reason": "approval",
            "tether.approval_id": parked.approval_id,
            "gen_ai.tool.call.id": parked.call_id,
        }
        tool = (_tool_names.get() or {}).get(parked.call_id)
        if tool is not None:
            attributes["gen_ai.tool.name"] = tool
    elif isinstance(parked, InputParked):
        attributes = {
            "tether.parked.reason": "input",
            "tether.input_id": parked.input_id,
            "gen_ai.tool.call.id": parked.call_id,
        }
    elif isinstance(parked, ChildrenPending):
        attributes = {
            "tether.parked.reason": "children",
            "tether.task.call_ids": list(parked.call_ids),
        }
    else:
        attributes = {"tether.parked.reason": parked.code}
    execution_id = getattr(parked, "execution_id", None)
    if isinstance(execution_id, str):
        attributes["tether.execution_id"] = execution_id
    return attributes
