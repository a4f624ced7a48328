"""``GET /metrics``: the runtime's metrics in the Prometheus text format (docs/metrics.md).

Each scrape reads :meth:`Runtime.metrics_snapshot` (what this process counted, and the
store's state as one grouped count) and renders it with ``prometheus_client`` through a
registry of its own, never the library's global one: several apps in one process (a test's)
never see each other's series. The scope is ``metrics:read``.
"""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tether.engine import INSTRUMENTS, MetricsSnapshot
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import failures

__all__ = ("SnapshotCollector", "metrics_router", "render_metrics")

metrics_router = APIRouter(tags=["metrics"])

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text format every Prometheus reads (what ``generate_latest`` writes for these names;
prometheus_client's latest says 1.0.0, which a Prometheus before 3.0 does not know)."""


class SnapshotCollector(Collector):
    """The families of one :class:`MetricsSnapshot`, every instrument listed (one without a
    series yet is a family without samples, so a dashboard finds its name)."""

    def __init__(self, snapshot: MetricsSnapshot) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snapshot = self._snapshot
        for instrument in INSTRUMENTS:
            labels = list(instrument.labels)
            # prometheus_client adds _total to a counter's samples: the family is named without.
            if instrument.kind == "counter":
                counter = CounterMetricFamily(
                    instrument.name.removesuffix("_total"), instrument.help, labels=labels
                )
                for values, value in sorted(snapshot.counter(instrument.name).items()):
                    counter.add_metric(list(values), value)
                yield counter
            elif instrument.kind == "gauge":
                gauge = GaugeMetricFamily(instrument.name, instrument.help, labels=labels)
                for values, value in sorted(snapshot.gauge(instrument.name).items()):
                    gauge.add_metric(list(values), value)
                yield gauge
            else:
                histogram = HistogramMetricFamily(instrument.name, instrument.help, labels=labels)
                series = snapshot.histograms.get(instrument.name, {})
                for values, observed in sorted(series.items()):
                    bounds = [*(repr(float(b)) for b in instrument.buckets), "+Inf"]
                    buckets = list(zip(bounds, observed.cumulative(), strict=True))
                    histogram.add_metric(list(values), buckets, observed.sum)
                yield histogram
        info = InfoMetricFamily("tether_worker", "This process's worker identity.")
        info.add_metric([], {"owner_id": snapshot.owner_id})
        yield info


def render_metrics(snapshot: MetricsSnapshot) -> bytes:
    """``snapshot`` in the Prometheus text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot))
    return generate_latest(registry)


@metrics_router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text exposition format (docs/metrics.md).",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **failures(503),
    },
)
async def metrics(runtime: RuntimeDependency) -> Response:
    """This process's counters and histograms, and the store's queued, running, waiting and
    gated submissions (cluster-wide), in the Prometheus text format."""
    snapshot = await runtime.metrics_snapshot()
    return Response(render_metrics(snapshot), media_type=CONTENT_TYPE)
