"""The runtime's metrics: engine events counted as they come, and the store's state as it is.

:class:`EngineMetrics` is an observer of the runtime's own (every
``Runtime`` has one, :attr:`Runtime.metrics`), keeping counters and histograms in plain
dictionaries keyed by bounded label values (agent, model, status, reason: never a session
or submission id). It imports no metrics library: ``/metrics`` renders a
:class:`MetricsSnapshot` in the Prometheus text format (``tether.http``), and an
OpenTelemetry sink (``tether.otel.OtelMetrics``) hears each count and observation as it is
made. What describes the store's state (queued, running, waiting, gates pending) is read from
the store when it is asked for (:meth:`Runtime.metrics_snapshot`): one grouped count,
cluster-wide, exact after any crash. docs/metrics.md lists every instrument.

Example::

    snapshot = await runtime.metrics_snapshot()
    for (agent, status), count in snapshot.counter("tether_submissions_settled_total").items():
        print(agent, status, count)
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from tether.engine._observe import (
    ApprovalDecidedEvent,
    AttemptStarted,
    EngineEvent,
    InputAnsweredEvent,
    ModelCallFailed,
    RecoveryDecided,
    SubmissionAdmitted,
    SubmissionClaimed,
    SubmissionSettledEvent,
    SubmissionSpawned,
    SubmissionWaiting,
    TurnEnded,
)
from tether.models import cost_of
from tether.store import HeldBack, Submission, VersionCount

__all__ = (
    "INSTRUMENTS",
    "EngineMetrics",
    "HistogramValue",
    "Instrument",
    "MetricSink",
    "MetricsSnapshot",
    "limited_gauge",
    "provider_error_class",
    "store_gauges",
)

Kind = Literal["counter", "histogram", "gauge"]
Labels = tuple[str, ...]

LATENCY_BUCKETS: Final = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
"""Seconds, for what takes a run's time or a person's (settlement, a gate's decision)."""
COMMIT_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
"""Seconds, for a store commit (an SQLite commit takes 0.1-0.2 ms, docs/architecture.md §9)."""


@dataclass(frozen=True, slots=True)
class Instrument:
    """One metric: its name (Prometheus's, with its unit and, for a counter, ``_total``),
    kind, label names, meaning, histogram buckets, and whether it is the store's state
    (cluster-wide, read at scrape time) or this process's."""

    name: str
    kind: Kind
    labels: Labels
    help: str
    unit: str = ""
    buckets: tuple[float, ...] = ()
    cluster: bool = False


INSTRUMENTS: Final[tuple[Instrument, ...]] = (
    Instrument(
        "tether_submissions_admitted_total",
        "counter",
        ("agent",),
        "Submissions this process admitted, a subagent's children included (an idempotent "
        "replay is not counted).",
    ),
    Instrument(
        "tether_submissions_settled_total",
        "counter",
        ("agent", "status"),
        "Submissions this process settled, by settlement status.",
    ),
    Instrument(
        "tether_submission_settle_duration_seconds",
        "histogram",
        ("agent", "status"),
        "From admission to settlement, of the submissions this process settled.",
        "seconds",
        LATENCY_BUCKETS,
    ),
    Instrument(
        "tether_claims_total",
        "counter",
        ("agent",),
        "Submissions this worker claimed (each claim starts an attempt).",
    ),
    Instrument(
        "tether_attempts_total",
        "counter",
        ("agent",),
        "Attempts this process started (a resume after a park is one).",
    ),
    Instrument(
        "tether_attempt_retries_total",
        "counter",
        ("agent",),
        "Attempts past a submission's first counted one: after a crash, a lost lease or a "
        "transient error.",
    ),
    Instrument(
        "tether_attempts_running",
        "gauge",
        (),
        "Attempts running in this process now.",
    ),
    Instrument(
        "tether_lease_takeovers_total",
        "counter",
        ("reason",),
        "Claims this process released for another attempt: reason lease_expired or "
        "owner_died (its worker's liveness lock was free).",
    ),
    Instrument(
        "tether_recoveries_total",
        "counter",
        ("decision",),
        "Recovery decisions this process made (RecoveryDecided), by decision.",
    ),
    Instrument(
        "tether_gate_decisions_total",
        "counter",
        ("kind", "decision"),
        "Gates decided through this process: kind approval, input or budget.",
    ),
    Instrument(
        "tether_budget_gates_opened_total",
        "counter",
        ("agent",),
        "Runs this process parked on a budget gate (their budget ran out under the park "
        "policy, docs/budgets.md).",
    ),
    Instrument(
        "tether_budget_exhausted_total",
        "counter",
        ("agent",),
        "Submissions this process settled failed with budget_exhausted (also counted in "
        "tether_submissions_settled_total, status failed).",
    ),
    Instrument(
        "tether_gate_decision_duration_seconds",
        "histogram",
        ("kind",),
        "From a gate's request to its decision (or answer).",
        "seconds",
        LATENCY_BUCKETS,
    ),
    Instrument(
        "tether_model_calls_total",
        "counter",
        ("agent", "model", "outcome"),
        "Requests to a model provider (each try of a call), outcome ok or error.",
    ),
    Instrument(
        "tether_model_tokens_total",
        "counter",
        ("agent", "model", "kind"),
        "Tokens the provider reported: kind input, output, cache_read, cache_write, reasoning.",
    ),
    Instrument(
        "tether_model_cost_usd_total",
        "counter",
        ("agent", "model"),
        "Dollars the calls cost, where a price is known (tether.models.cost_of).",
        "usd",
    ),
    Instrument(
        "tether_provider_errors_total",
        "counter",
        ("agent", "status"),
        "Failed tries of a model call: status 429, 5xx, timeout, connection or 4xx.",
    ),
    Instrument(
        "tether_model_retries_total",
        "counter",
        ("agent",),
        "Model call tries made again after a provider's failure.",
    ),
    Instrument(
        "tether_store_commit_duration_seconds",
        "histogram",
        ("operation",),
        "Store writes the engine waited for: admit, claim, append, append_settled.",
        "seconds",
        COMMIT_BUCKETS,
    ),
    Instrument(
        "tether_sse_subscribers",
        "gauge",
        (),
        "Live streams following a session on this process.",
    ),
    Instrument(
        "tether_submissions_queued",
        "gauge",
        ("agent",),
        "Submissions queued, in the whole store.",
        cluster=True,
    ),
    Instrument(
        "tether_submissions_scheduled",
        "gauge",
        ("agent",),
        "Delayed dispatches waiting for their time (status scheduled), in the whole store.",
        cluster=True,
    ),
    Instrument(
        "tether_timers_next_due_seconds",
        "gauge",
        (),
        "Seconds until the earliest time something waits for (a delayed dispatch, a "
        "sleeping run, a deadline): negative when it is overdue by that much; no sample when "
        "nothing waits for a time. In the whole store.",
        "seconds",
        cluster=True,
    ),
    Instrument(
        "tether_submissions_limited",
        "gauge",
        ("agent", "kind"),
        "Queued submissions held back by a limit of runs in flight (waitReason limit): kind "
        "agent (their agent's) or tenant (their tenant's). In the whole store, as this "
        "process's limits see it.",
        cluster=True,
    ),
    Instrument(
        "tether_submissions_running",
        "gauge",
        ("agent",),
        "Submissions claimed and running, in the whole store.",
        cluster=True,
    ),
    Instrument(
        "tether_submissions_waiting",
        "gauge",
        ("agent", "reason"),
        "Submissions parked, by what they wait for (approval, input, budget, children, "
        "timer, version_diverged), in the whole store.",
        cluster=True,
    ),
    Instrument(
        "tether_gates_pending",
        "gauge",
        ("agent", "kind"),
        "Runs parked on a person (kind approval, input or budget), in the whole store.",
        cluster=True,
    ),
)
_BY_NAME: Final = {instrument.name: instrument for instrument in INSTRUMENTS}
_COUNTED: Final[frozenset[type[EngineEvent]]] = frozenset(
    {
        SubmissionAdmitted,
        SubmissionSettledEvent,
        SubmissionSpawned,
        SubmissionClaimed,
        SubmissionWaiting,
        AttemptStarted,
        RecoveryDecided,
        ApprovalDecidedEvent,
        InputAnsweredEvent,
        ModelCallFailed,
        TurnEnded,
    }
)
"""The events the observer counts (exactly these classes: the engine emits no subclass)."""
_GATE_REASONS: Final = frozenset({"approval", "input", "budget"})
_BUDGET_EXHAUSTED: Final = "budget_exhausted"


@dataclass(slots=True)
class HistogramValue:
    """One label set's observations: a count per bucket (not cumulative; the last is +Inf),
    their sum and their number."""

    counts: list[int]
    sum: float = 0.0
    count: int = 0

    def cumulative(self) -> list[int]:
        total, out = 0, []
        for count in self.counts:
            total += count
            out.append(total)
        return out


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """Every instrument's values at one moment: by instrument name, by label values (in the
    order of :attr:`Instrument.labels`).

    Example::

        snapshot = await runtime.metrics_snapshot()
        settled = snapshot.counter("tether_submissions_settled_total")
        failed = sum(n for (agent, status), n in settled.items() if status == "failed")
    """

    counters: Mapping[str, Mapping[Labels, float]]
    histograms: Mapping[str, Mapping[Labels, HistogramValue]]
    gauges: Mapping[str, Mapping[Labels, float]]
    owner_id: str = ""

    def counter(self, name: str) -> Mapping[Labels, float]:
        return self.counters.get(name, {})

    def gauge(self, name: str) -> Mapping[Labels, float]:
        return self.gauges.get(name, {})


class MetricSink(Protocol):
    """Hears each count and observation as :class:`EngineMetrics` makes it, and the store's
    state when the runtime reads it (OpenTelemetry's instruments: ``tether.otel``).

    Example::

        class Printer:
            def add(self, instrument, labels, value): print(instrument.name, labels, value)
            def record(self, instrument, labels, value): print(instrument.name, labels, value)
            def gauges(self, snapshot): pass

        runtime = Runtime(agents, store, metric_sinks=[Printer()])
    """

    def add(self, instrument: Instrument, labels: Labels, value: float) -> None: ...

    def record(self, instrument: Instrument, labels: Labels, value: float) -> None: ...

    def gauges(self, snapshot: MetricsSnapshot) -> None: ...


def provider_error_class(status: int | None, code: str) -> str:
    """The bounded label of a provider's failure: ``429``, ``5xx``, ``timeout``, ``4xx``, or
    ``connection`` (no status: the provider was not reached)."""
    if code == "provider_timeout" or status == 408:
        return "timeout"
    if status is None:
        return "connection"
    if status == 429:
        return "429"
    return "5xx" if status >= 500 else "4xx"


class EngineMetrics:
    """Counts what the engine's events say: an observer. Every runtime installs its own
    (:attr:`Runtime.metrics`); an application reads it, never adds one.

    Example::

        runtime.metrics.snapshot().counter("tether_claims_total")  # this process's claims
    """

    def __init__(self, sinks: Sequence[MetricSink] = ()) -> None:
        self.sinks = list(sinks)
        self._counters: dict[str, dict[Labels, float]] = {}
        self._histograms: dict[str, dict[Labels, HistogramValue]] = {}

    # --- recording ----------------------------------------------------------------------

    def add(self, name: str, labels: Labels, value: float = 1.0) -> None:
        series = self._counters.setdefault(name, {})
        series[labels] = series.get(labels, 0.0) + value
        for sink in self.sinks:
            sink.add(_BY_NAME[name], labels, value)

    def observe(self, name: str, labels: Labels, value: float) -> None:
        instrument = _BY_NAME[name]
        series = self._histograms.setdefault(name, {})
        histogram = series.get(labels)
        if histogram is None:
            histogram = series[labels] = HistogramValue([0] * (len(instrument.buckets) + 1))
        histogram.counts[bisect.bisect_left(instrument.buckets, value)] += 1
        histogram.sum += value
        histogram.count += 1
        for sink in self.sinks:
            sink.record(instrument, labels, value)

    def commit(self, operation: str, seconds: float) -> None:
        """A store write the engine waited ``seconds`` for."""
        self.observe("tether_store_commit_duration_seconds", (operation,), seconds)

    # --- the observer ---------------------------------------------------------------------

    def __call__(self, event: EngineEvent) -> None:
        if type(event) not in _COUNTED:  # deltas, tool progress: one set lookup, nothing more
            return
        agent = event.correlation.session_key.agent
        if isinstance(event, SubmissionAdmitted):
            if event.created:
                self.add("tether_submissions_admitted_total", (agent,))
        elif isinstance(event, SubmissionSpawned):  # a subagent's child, admitted by its parent
            self.add("tether_submissions_admitted_total", (agent,))
        elif isinstance(event, SubmissionSettledEvent):
            status = str(event.settlement.get("status", "unknown"))
            self.add("tether_submissions_settled_total", (agent, status))
            if event.settlement.get("errorCode") == _BUDGET_EXHAUSTED:
                self.add("tether_budget_exhausted_total", (agent,))
            if event.admitted_at is not None and event.settled_at is not None:
                waited = (event.settled_at - event.admitted_at).total_seconds()
                self.observe(
                    "tether_submission_settle_duration_seconds", (agent, status), max(waited, 0)
                )
        elif isinstance(event, SubmissionClaimed):
            self.add("tether_claims_total", (agent,))
        elif isinstance(event, SubmissionWaiting):
            if event.reason == "budget":
                self.add("tether_budget_gates_opened_total", (agent,))
        elif isinstance(event, AttemptStarted):
            self.add("tether_attempts_total", (agent,))
            if event.attempt_count > 1:
                self.add("tether_attempt_retries_total", (agent,))
        elif isinstance(event, RecoveryDecided):
            self.add("tether_recoveries_total", (event.decision,))
            if event.decision in ("lease_expired", "owner_died"):
                self.add("tether_lease_takeovers_total", (event.decision,))
        elif isinstance(event, ApprovalDecidedEvent | InputAnsweredEvent):
            kind = event.gate if isinstance(event, ApprovalDecidedEvent) else "input"
            decision = event.decision if isinstance(event, ApprovalDecidedEvent) else "answer"
            self.add("tether_gate_decisions_total", (kind, decision))
            if event.waited is not None:
                self.observe("tether_gate_decision_duration_seconds", (kind,), event.waited)
        elif isinstance(event, TurnEnded):
            self._turn_ended(agent, event)
        elif isinstance(event, ModelCallFailed):
            status = provider_error_class(event.status, event.code)
            self.add("tether_provider_errors_total", (agent, status))
            if event.retried:
                self.add("tether_model_retries_total", (agent,))

    def _turn_ended(self, agent: str, event: TurnEnded) -> None:
        model = event.model
        outcome = "ok" if event.error is None else "error"
        self.add("tether_model_calls_total", (agent, model, outcome))
        usage = event.usage
        if usage is None:
            return
        for kind, tokens in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("reasoning", usage.reasoning_tokens),
        ):
            if tokens:
                self.add("tether_model_tokens_total", (agent, model, kind), tokens)
        cost = cost_of(model, usage)
        if cost is not None:
            self.add("tether_model_cost_usd_total", (agent, model), cost)

    # --- reading --------------------------------------------------------------------------

    def snapshot(
        self,
        *,
        gauges: Mapping[str, Mapping[Labels, float]] | None = None,
        owner_id: str = "",
    ) -> MetricsSnapshot:
        """What this process counted, and ``gauges`` beside its own (the store's state)."""
        every = {name: dict(series) for name, series in (gauges or {}).items()}
        return MetricsSnapshot(
            {name: dict(series) for name, series in self._counters.items()},
            {
                name: {
                    labels: HistogramValue(list(h.counts), h.sum, h.count)
                    for labels, h in series.items()
                }
                for name, series in self._histograms.items()
            },
            every,
            owner_id,
        )


def store_gauges(counts: Sequence[VersionCount]) -> dict[str, dict[Labels, float]]:
    """The cluster-wide gauges from ``VersionStore.version_counts`` rows (agent, status,
    wait reason, count): every version summed, a gated wait counted as a pending gate."""
    gauges: dict[str, dict[Labels, float]] = {
        "tether_submissions_scheduled": {},
        "tether_submissions_queued": {},
        "tether_submissions_running": {},
        "tether_submissions_waiting": {},
        "tether_gates_pending": {},
    }

    def bump(name: str, labels: Labels, by: int) -> None:
        gauges[name][labels] = gauges[name].get(labels, 0) + by

    for row in counts:
        if row.status == "scheduled":
            bump("tether_submissions_scheduled", (row.agent,), row.count)
        elif row.status == "queued":
            bump("tether_submissions_queued", (row.agent,), row.count)
        elif row.status == "running":
            bump("tether_submissions_running", (row.agent,), row.count)
        elif row.status == "waiting":
            reason = row.wait_reason or "unknown"
            bump("tether_submissions_waiting", (row.agent, reason), row.count)
            if reason in _GATE_REASONS:
                bump("tether_gates_pending", (row.agent, reason), row.count)
    return gauges


def limited_gauge(held: HeldBack, queued: Sequence[Submission]) -> dict[Labels, float]:
    """The ``tether_submissions_limited`` series: of the ``queued`` submissions, those
    ``held`` back, by agent and by whose limit holds them (``agent`` before ``tenant``: a
    tenant's name is never a label)."""
    counts: dict[Labels, float] = {}
    for submission in queued:
        agent = submission.key.agent
        if agent in held.agents:
            labels: Labels = (agent, "agent")
        elif submission.tenant is not None and submission.tenant in held.tenants:
            labels = (agent, "tenant")
        else:
            continue
        counts[labels] = counts.get(labels, 0) + 1
    return counts
