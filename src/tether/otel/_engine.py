"""Engine work as OpenTelemetry spans: attempt → execution → model calls and tool calls.

An interceptor, so each span is *current* while its work runs: spans nest through the
context, and a provider SDK's own instrumentation lands under the model call that made it.
Only live work is traced; what a resume or replay serves from the log makes no span.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tether.engine import Operation
from tether.messages import ModelResponse, ToolResult

__all__ = ("OtelInterceptor", "tool_attributes")

_PROPAGATOR = TraceContextTextMapPropagator()


def tool_attributes(name: str, call_id: str) -> dict[str, str]:
    """The GenAI semantic-convention attributes of an ``execute_tool {name}`` span."""
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }


class OtelInterceptor:
    """Pass to ``Runtime(..., interceptors=[OtelInterceptor()])``.

    Spans: ``invoke_agent {agent}`` per attempt, ``execution {name}`` inside it,
    ``chat {model}`` per model call (with ``gen_ai.usage.*`` tokens and the finish reason)
    and ``execute_tool {name}`` per tool call, all carrying ``tether.*`` correlation ids.
    An attempt joins the trace its submission was dispatched with (a ``traceparent``), so
    admission, queueing and every recovery attempt show up under the caller's span.

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
        with self.tracer.start_as_current_span(
            name,
            context=_parent(operation),
            attributes=attributes,
            record_exception=True,
            set_status_on_exception=True,
        ) as span:
            result = await call_next()
            _annotate(span, result)
            return result


def _parent(operation: Operation) -> Context | None:
    """An attempt's parent is the dispatcher's span; everything else nests in the current."""
    trace_context = operation.correlation.trace
    if operation.boundary != "attempt" or not trace_context:
        return None
    return _PROPAGATOR.extract(dict(trace_context))


def _describe(operation: Operation) -> tuple[str, dict[str, str]]:
    c = operation.correlation
    attributes = {
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
        attributes |= {"gen_ai.operation.name": "chat", "gen_ai.request.model": operation.name}
        return f"chat {operation.name}", attributes
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
            ):
                if value is not None:  # not reported stays absent; a real 0 is kept
                    span.set_attribute(key, value)
        if result.finish_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [result.finish_reason])
    elif isinstance(result, ToolResult) and result.is_error:
        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR))
