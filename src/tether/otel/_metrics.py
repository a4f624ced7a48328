"""The runtime's metrics as OpenTelemetry instruments, exported over OTLP/HTTP.

The same instruments as ``/metrics`` (``tether.engine.INSTRUMENTS``, docs/metrics.md): a
counter or a histogram hears each count as the engine makes it; a gauge is observed from
the latest state the runtime read (the store's, every ``metrics_interval``). A name is the
Prometheus one without ``_total`` (an OTel-to-Prometheus bridge adds it back), its unit
said apart.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.metrics import (
    CallbackOptions,
    Counter,
    Histogram,
    Meter,
    Observation,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from tether.engine import INSTRUMENTS, Dependency, Instrument, MetricsSnapshot

__all__ = ("OtelMetrics", "otlp_metrics")

_UNITS = {"seconds": "s", "usd": "USD", "": "1"}


class _WatchedExporter(OTLPMetricExporter):
    """The OTLP exporter, keeping whether its last export went through (``/readyz``)."""

    last: MetricExportResult | None = None

    def export(
        self, metrics_data: MetricsData, timeout_millis: float | None = 10_000, **kwargs: object
    ) -> MetricExportResult:
        result = super().export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        self.last = result
        return result


class OtelMetrics:
    """A metric sink (``Runtime(..., metric_sinks=[OtelMetrics(meter)])``) that records every
    instrument on ``meter``. Made by :func:`otlp_metrics` for a collector, it also reports
    the exporter's state to ``/readyz`` (``otlp``, not required) and flushes on
    :meth:`shutdown`.

    Example::

        from opentelemetry.sdk.metrics import MeterProvider

        sink = OtelMetrics(MeterProvider().get_meter("tether"))
        runtime = Runtime(agents, store, metric_sinks=[sink])
    """

    def __init__(
        self,
        meter: Meter,
        *,
        provider: MeterProvider | None = None,
        exporter: _WatchedExporter | None = None,
    ) -> None:
        self._provider = provider
        self._exporter = exporter
        self._latest: MetricsSnapshot | None = None
        self._counters: dict[str, Counter] = {}
        self._histograms: dict[str, Histogram] = {}
        for instrument in INSTRUMENTS:
            name = instrument.name.removesuffix("_total")
            unit = _UNITS.get(instrument.unit, instrument.unit)
            if instrument.kind == "counter":
                self._counters[instrument.name] = meter.create_counter(
                    name, unit=unit, description=instrument.help
                )
            elif instrument.kind == "histogram":
                self._histograms[instrument.name] = meter.create_histogram(
                    name,
                    unit=unit,
                    description=instrument.help,
                    explicit_bucket_boundaries_advisory=list(instrument.buckets),
                )
            else:
                meter.create_observable_gauge(
                    name,
                    callbacks=[self._observer(instrument)],
                    unit=unit,
                    description=instrument.help,
                )

    def _observer(self, instrument: Instrument) -> _GaugeCallback:
        return _GaugeCallback(self, instrument)

    def add(self, instrument: Instrument, labels: tuple[str, ...], value: float) -> None:
        self._counters[instrument.name].add(value, _attributes(instrument.labels, labels))

    def record(self, instrument: Instrument, labels: tuple[str, ...], value: float) -> None:
        self._histograms[instrument.name].record(value, _attributes(instrument.labels, labels))

    def gauges(self, snapshot: MetricsSnapshot) -> None:
        self._latest = snapshot

    def latest(self) -> MetricsSnapshot | None:
        """The state the runtime read last (``None`` before its first read)."""
        return self._latest

    def health(self) -> Dependency:
        """The exporter's last export: ``up``, ``down``, or ``unknown`` before the first."""
        if self._exporter is None or self._exporter.last is None:
            return Dependency("otlp", "unknown", required=False)
        if self._exporter.last is MetricExportResult.SUCCESS:
            return Dependency("otlp", "up", required=False)
        return Dependency("otlp", "down", required=False, detail="the last export failed")

    def shutdown(self) -> None:
        """Export what is left and stop (a sink made by :func:`otlp_metrics`)."""
        if self._provider is not None:
            self._provider.shutdown()


class _GaugeCallback:
    """Observes one gauge from the sink's latest snapshot."""

    def __init__(self, sink: OtelMetrics, instrument: Instrument) -> None:
        self._sink = sink
        self._instrument = instrument

    def __call__(self, options: CallbackOptions) -> Iterable[Observation]:
        snapshot = self._sink.latest()
        if snapshot is None:
            return []
        names = self._instrument.labels
        return [
            Observation(value, _attributes(names, labels))
            for labels, value in snapshot.gauge(self._instrument.name).items()
        ]


def _attributes(names: tuple[str, ...], labels: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(names, labels, strict=True))


def otlp_metrics(
    endpoint: str, *, service_name: str = "tether", interval: float = 15.0
) -> OtelMetrics:
    """A sink exporting every ``interval`` seconds to an OTLP/HTTP collector at ``endpoint``
    (its base URL; metrics go to ``/v1/metrics``). Call ``shutdown()`` on exit to flush.

    Example::

        sink = otlp_metrics("http://127.0.0.1:4318")
        runtime = Runtime(agents, store, metric_sinks=[sink])
    """
    base = endpoint.rstrip("/").removesuffix("/v1/traces")
    url = base if base.endswith("/v1/metrics") else f"{base}/v1/metrics"
    exporter = _WatchedExporter(endpoint=url)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=interval * 1000)
    provider = MeterProvider(
        resource=Resource.create({"service.name": service_name}), metric_readers=[reader]
    )
    return OtelMetrics(provider.get_meter("tether"), provider=provider, exporter=exporter)
