"""Exporting Tether's spans over OTLP/HTTP (``tether serve --otlp-endpoint``)."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

__all__ = ("otlp_provider",)


def otlp_provider(
    endpoint: str, *, service_name: str = "tether", schedule_delay: float = 0.5
) -> TracerProvider:
    """A tracer provider batching spans to an OTLP/HTTP collector at ``endpoint`` (its base
    URL; spans go to ``/v1/traces``). Call ``shutdown()`` on exit to flush.

    Example::

        provider = otlp_provider("http://127.0.0.1:4318")
        tracer = provider.get_tracer("tether")
        runtime = Runtime(agents, store, interceptors=[OtelInterceptor(tracer)])
    """
    base = endpoint.rstrip("/")
    url = base if base.endswith("/v1/traces") else f"{base}/v1/traces"
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=url), schedule_delay_millis=int(schedule_delay * 1000)
        )
    )
    return provider
