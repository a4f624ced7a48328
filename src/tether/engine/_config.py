"""A runtime's settings: leases, budgets, timeouts, schedules, retention (``RuntimeConfig``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tether._ids import new_ulid
from tether.engine._budget import Budget, check_session_budget
from tether.engine._clock import Clock
from tether.engine._limits import Limits
from tether.engine._metrics import MetricSink
from tether.engine._redact import Redactor
from tether.engine._retention import Retention
from tether.engine._schedules import Schedule
from tether.engine._subagents import SubagentLimits
from tether.engine._tenant_budget import TenantBudget
from tether.engine._webhooks import WebhookSettings, WebhookSubscription
from tether.models import ModelRetryPolicy
from tether.store import ExportKey

__all__ = ("RuntimeConfig",)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Engine settings (docs/architecture.md §8). Times are in seconds."""

    lease: float = 30.0
    heartbeat: float | None = None
    """Lease renewal interval; ``lease / 3`` by default."""
    claim_interval: float = 0.25
    max_concurrent_runs: int = 64
    max_attempts: int = 10
    submission_timeout: float = 3600.0
    timeout_grace: float = 10.0
    """How long a timed-out or aborted run gets to unwind before it is settled over."""
    result_retries: int = 2
    budget: Budget | None = None
    """Limits on every submission's spending (docs/budgets.md), where neither its dispatch
    nor its agent sets them."""
    session_budget: Budget | None = None
    """Limits on what each session spends, all its submissions together (docs/budgets.md),
    where its agent sets none (``AgentDefinition.session_budget``); no ``wall_time``."""
    priority_aging: float = 60.0
    """Seconds a queued submission waits to gain one step of priority (docs/priorities.md):
    priority ``p`` goes ahead of what was queued up to ``p`` times this before it, and no
    submission waits behind newer ones forever. Fixed per submission at its admission."""
    model_limits: Mapping[str, Limits] = field(default_factory=dict)
    """Limits on the model calls of every run, by provider (``"openai"``) or provider and
    model (``"openai:gpt-4o"``), both applying to a call that matches both (docs/limits.md)."""
    tenant_limits: Mapping[str, Limits] = field(default_factory=dict)
    """Limits of each tenant's runs and model calls, by tenant; ``"*"``: every tenant
    without its own (docs/limits.md)."""
    tenant_budgets: Mapping[str, TenantBudget | Sequence[TenantBudget]] = field(
        default_factory=dict
    )
    """What all of each tenant's runs together may spend per UTC day or month, by tenant;
    ``"*"``: every tenant without its own (docs/budgets.md). Needs the store's ``usage``
    capability; a run of no tenant spends from none."""
    limit_poll: float = 1.0
    """The longest a run waits for a limit before it asks the store again (a slot given
    back on another worker is seen then)."""
    backoff_cap: float = 5.0
    shutdown_timeout: float = 10.0
    owner_id: str = field(default_factory=lambda: f"worker-{new_ulid()}")
    env: Mapping[str, str] = field(default_factory=dict)
    tenant_of: Callable[[str, str], str | None] | None = None
    """The tenant the sessions of ``(agent, instance)`` belong to, for an application that
    maps its instances to tenants (docs/auth.md): an admission of no tenant (an operator's,
    a schedule's, a library call's) takes the instance's; one of another tenant than the
    instance's is refused as ``ConversationNotFound``, nothing written. ``None`` (the
    default), or an instance it maps to ``None``: a session is its first admitter's."""
    redact: Redactor | None = None
    """Applied to tool errors, model errors and settlement failures before they are
    journaled. ``None``: a :class:`SecretRedactor` over the process environment and ``env``,
    read when the runtime is built."""
    subagents: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Which agents each agent may delegate to through its task tool (absent: no task tool);
    every name must be a registered agent."""
    subagent_limits: SubagentLimits = field(default_factory=SubagentLimits)
    clock: Clock | None = None
    """What leases, heartbeats, ticks and deadlines are measured by; ``None``: the system's.
    Tests pass a :class:`ManualClock` to move time on without waiting."""
    schedules: Sequence[Schedule] = ()
    """Schedules that every worker of this configuration fires (docs/schedules.md); more
    are added at run time with :meth:`Runtime.add_schedule`, kept in the store."""
    schedule_poll: float = 1.0
    """How often a worker lists the store's schedules (those added on another node)."""
    schedule_min_period: float = 1.0
    """The closest two windows of one schedule may be (``every``, or a cron expression's
    gaps): a schedule under it is refused where it is defined, and one the store keeps
    does not fire."""
    retention: Retention | None = None
    """What a worker's pruner erases and truncates (docs/retention.md); ``None``: nothing."""
    export_key: ExportKey | None = None
    """Signs the trailer of every export served (``GET /conversations/{id}/export``), so
    ``tether import --require-signed`` can tell this server's exports from forgeries;
    ``None``: exports are unsigned."""
    model_timeout: float | None = None
    """Seconds a model call's try may go without a byte of its answer (``math.inf``: no
    limit); ``None``: ``TETHER_MODEL_TIMEOUT``, else 300, read when the runtime is built."""
    model_retry: ModelRetryPolicy = field(default_factory=ModelRetryPolicy)
    """How a model call that failed is tried again within the call (docs/models.md)."""
    metric_sinks: Sequence[MetricSink] = ()
    """Where the runtime's metrics go besides ``/metrics`` (``tether.otel.OtelMetrics``:
    OpenTelemetry); each hears every count as it is made (docs/metrics.md)."""
    metrics_interval: float = 15.0
    """With ``metric_sinks``: how often a started runtime reads the store's state (queued,
    running, waiting, gates pending) for them."""
    webhooks: Sequence[WebhookSubscription] = ()
    """Standing outbound webhook subscriptions, per agent (docs/how-to/webhooks.md)."""
    webhook_settings: WebhookSettings = field(default_factory=WebhookSettings)
    """How outbound webhooks are signed, checked (SSRF) and retried."""

    def __post_init__(self) -> None:
        check_session_budget(self.session_budget)

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat if self.heartbeat is not None else self.lease / 3
