"""OpenTelemetry export (extra ``otel``): span signals become GenAI-convention spans.

Example::

    from tether.otel import OtelSpanSink
    from tether.stream import UnifiedEmitter

    emitter = UnifiedEmitter(tracer=OtelSpanSink())
"""

from tether.otel._sink import OtelSpanSink

__all__ = ("OtelSpanSink",)
