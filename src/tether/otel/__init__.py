"""OpenTelemetry (extra ``otel``): engine work and span signals as GenAI-convention spans, and
the runtime's metrics as OpenTelemetry instruments (``OtelMetrics``).

Example::

    from tether.otel import OtelSpanSink
    from tether.stream import UnifiedEmitter

    emitter = UnifiedEmitter(tracer=OtelSpanSink())
"""

from tether.otel._engine import OtelInterceptor
from tether.otel._logs import TraceLogFilter
from tether.otel._metrics import OtelMetrics, otlp_metrics
from tether.otel._otlp import otlp_provider
from tether.otel._sink import OtelSpanSink

__all__ = (
    "OtelInterceptor",
    "OtelMetrics",
    "OtelSpanSink",
    "TraceLogFilter",
    "otlp_metrics",
    "otlp_provider",
)
