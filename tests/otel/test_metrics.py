"""The runtime's metrics as OpenTelemetry instruments, read with the SDK's in-memory reader:
the same counts as ``/metrics``, and the store's state observed as gauges."""

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tether.engine import ManualClock
from tether.models import ScriptedModel
from tether.otel import OtelMetrics

from ..engine.agents import echo_agent

Make = Callable[..., Any]


def points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Every data point by metric name: its attributes and its value (a sum's or a gauge's
    value, a histogram's count)."""
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    value = getattr(point, "value", None)
                    if value is None:
                        value = point.count  # type: ignore[union-attr]
                    found.setdefault(metric.name, []).append((dict(point.attributes or {}), value))
    return found


async def test_the_counts_and_the_store_state_as_otel_instruments(
    make_runtime: Make, clock: ManualClock
) -> None:
    reader = InMemoryMetricReader()
    sink = OtelMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    model = ScriptedModel(lambda request: "hi")
    async with make_runtime({"echo": echo_agent(model)}, metric_sinks=[sink]) as runtime:
        for instance in ("a", "b"):
            receipt = await runtime.dispatch("echo", instance, "hello")
            await runtime.wait(receipt.submission_id)
        sink.gauges(await runtime.metrics_snapshot())  # what the runtime does each interval
        found = points(reader)
    assert found["tether_submissions_admitted"] == [({"agent": "echo"}, 2)]
    assert found["tether_submissions_settled"] == [({"agent": "echo", "status": "succeeded"}, 2)]
    assert found["tether_model_calls"] == [({"agent": "echo", "model": "test", "outcome": "ok"}, 2)]
    settle = found["tether_submission_settle_duration_seconds"]
    assert settle == [({"agent": "echo", "status": "succeeded"}, 2)]  # a histogram's count
    assert found["tether_sse_subscribers"] == [({}, 0)]
    assert sink.health().state == "unknown"  # no exporter: nothing to report
