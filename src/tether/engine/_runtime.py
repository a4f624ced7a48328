"""The runtime: durable submissions in, settlements out, however processes die.

Example::

    runtime = Runtime(
        agents={"assistant": AgentDefinition(lambda instance, env: AgentSpec(harness=MyHarness()))},
        store="sqlite:///./tether-data",
    )
    async with runtime:
        receipt = await runtime.dispatch("assistant", "acme", "What is the weather?")
        settlement = await runtime.wait(receipt.submission_id)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Literal, Self

from pydantic import JsonValue, ValidationError

from tether._failpoints import ARMED, arm_from_environment
from tether._ids import new_ulid
from tether.engine._agents import AgentDefinition
from tether.engine._app import App
from tether.engine._approvals import (
    ApprovalPage,
    approval_page,
    gate_correlation,
    gate_journal,
    gate_waited,
)
from tether.engine._budget import Budget
from tether.engine._clock import Clock, SystemClock
from tether.engine._config import RuntimeConfig
from tether.engine._context import EngineContext
from tether.engine._coordinator import Coordinator, requeue_if_stranded
from tether.engine._delays import due_time
from tether.engine._eventlog import log_event
from tether.engine._fork import Fork
from tether.engine._health import Dependency, HealthReporter
from tether.engine._inbound import Inbound, parse_inbound
from tether.engine._limits import LIMIT, LimitGate
from tether.engine._metrics import (
    EngineMetrics,
    MetricsSnapshot,
    limited_gauge,
    store_gauges,
)
from tether.engine._observe import (
    ApprovalDecidedEvent,
    Correlation,
    EngineEvent,
    InputAnsweredEvent,
    Instrumentation,
    Interceptor,
    Observer,
    SubmissionAdmitted,
)
from tether.engine._outbox import Outbox, targets_of
from tether.engine._progress import ProgressHub
from tether.engine._pruner import Pruner, PruneReport, prune
from tether.engine._queued import QueuedWaits
from tether.engine._receipts import Multitask, Receipt, SubmissionInfo
from tether.engine._redact import Redactor, SecretRedactor
from tether.engine._retention import Retention
from tether.engine._revocations import is_revoked, revoke
from tether.engine._rollout import (
    NO_WORKER_FOR_VERSION,
    VersionState,
    upgrade_parked,
    version_states,
)
from tether.engine._runs import RunRegistry, wait_settled
from tether.engine._scheduler import ScheduleBook, Scheduler
from tether.engine._schedules import Schedule, ScheduleInfo
from tether.engine._session_usage import SessionSpend, session_spend
from tether.engine._sessions import (
    SessionPage,
    SessionState,
    erase_session,
    patch_session_metadata,
    session_page,
)
from tether.engine._ssrf import check_webhook_url, networks_of
from tether.engine._steering import SteerWatches
from tether.engine._subagents import SubagentPolicy
from tether.engine._subtree import SubmissionTree, submission_tree
from tether.engine._tenant_budget import (
    Period,
    TenantBudgetGate,
    TenantUsage,
    budget_of,
    period_bounds,
)
from tether.engine._trace import trace_context
from tether.engine._upgrade_check import UpgradeCheck, check_upgrade
from tether.engine._usage import UsageTotals, total_usage
from tether.engine._versions import AgentVersions, flatten_versions
from tether.engine._views import ViewCache
from tether.engine._webhook_sender import WebhookSender
from tether.engine._webhooks import (
    ALLOW_VARIABLE,
    SECRET_VARIABLE,
    Callback,
    WebhookNotFound,
    parse_callback,
)
from tether.errors import (
    ApprovalNotFound,
    ConversationNotFound,
    InputNotFound,
    InvalidDispatch,
    InvalidSeq,
    NoRunInFlight,
    RuntimeClosed,
    SessionBusy,
    StoreUnavailable,
    SubmissionNotFound,
    UnknownAgent,
)
from tether.journal import NOT_MINTED, Decision, Journal, LogView
from tether.messages import Message
from tether.models import ModelCallPolicy, model_timeout_from_env
from tether.records import Actor, BudgetDecided, ConversationCreated, LogTruncated, Record
from tether.store import (
    DEFAULT_STORE_URL,
    MAX_SEQ,
    MAX_WEBHOOK_PAGE,
    Admission,
    AdmitAndClaimStore,
    ChangeFeed,
    ClaimSlots,
    Conversation,
    ErasedSession,
    GateKind,
    GateStatus,
    MetadataValue,
    NewSubmission,
    SessionKey,
    Store,
    StoreCapabilities,
    Submission,
    SubmissionStatus,
    WebhookDelivery,
    WebhookStatus,
    WebhookStore,
    check_priority,
    check_priority_aging,
    merge_metadata,
    open_store,
    require_capability,
    with_failpoints,
)

__all__ = ("Runtime",)

logger = logging.getLogger("tether.engine")


_NAME_LIMIT = 200
_AT_REST = frozenset({SubmissionStatus.SETTLED, SubmissionStatus.WAITING})


def _adopt_claimed(
    coordinator: Coordinator, attempt_id: str, slotted: bool, claiming: asyncio.Future[Admission]
) -> None:
    """Start what an admission claimed, as soon as its commit is known (awaited or not)."""
    if claiming.cancelled() or claiming.exception() is not None:
        return
    submission = claiming.result().submission
    if submission.attempt_id == attempt_id:
        coordinator.adopt(submission, slotted=slotted)


def check_seq(value: int, *, field: str, least: int = 0) -> int:
    """``value`` if it can name a record position, else ``InvalidSeq`` (never a store's
    overflow)."""
    if not least <= value <= MAX_SEQ:
        raise InvalidSeq(value, field=field, least=least)
    return value


def _extension(
    decision: str, extension: Budget | Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """A budget gate's extension as its decision records it: a ``Budget``'s wire form, with
    limits only (``InvalidDispatch`` naming the field otherwise)."""
    if extension is None:
        return None
    if decision != "approve":
        raise InvalidDispatch("only an approval extends a budget", field="extension")
    try:
        grant = extension if isinstance(extension, Budget) else Budget.model_validate(extension)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in ("extension", *error["loc"]))
        raise InvalidDispatch(str(error["msg"]), field=where) from None
    if grant.on_exhausted is not None:
        raise InvalidDispatch("an extension adds limits only", field="extension.onExhausted")
    wire: dict[str, Any] = grant.to_json_object()
    return wire


def _budget_wire(budget: Budget | Mapping[str, Any]) -> Any:
    """A dispatch's budget as its message's wire form takes it (a mapping is validated there)."""
    return budget.to_json_object() if isinstance(budget, Budget) else dict(budget)


def _check_name(kind: str, value: str) -> None:
    if not value or len(value) > _NAME_LIMIT or "/" in value or not value.isprintable():
        raise InvalidDispatch(
            f"must be 1-{_NAME_LIMIT} printable characters without '/'", field=kind
        )


def _shares_limits(config: RuntimeConfig, agents: Mapping[str, AgentDefinition]) -> bool:
    """Whether a limit must be kept in the store (``per_worker`` alone is kept in process)."""
    given = [
        *config.model_limits.values(),
        *config.tenant_limits.values(),
        *(d.limits for d in agents.values() if d.limits is not None),
    ]
    return any(limits.concurrency is not None or limits.limits_calls for limits in given) or bool(
        config.model_limits
    )


def _check_features(
    config: RuntimeConfig,
    capabilities: StoreCapabilities,
    agents: Mapping[str, AgentDefinition] | None = None,
) -> None:
    """``StoreCapabilityMissing`` for a configured feature the store cannot carry: refused
    when the runtime starts, not at the first run that needs it."""
    if any(config.subagents.values()):
        require_capability(capabilities.children, "children")
    if config.schedules:
        require_capability(capabilities.schedules, "schedules")
    if _shares_limits(config, agents or {}):
        require_capability(capabilities.limits, "limits")
    if config.tenant_budgets:
        require_capability(capabilities.usage, "usage")
    if config.retention is not None and config.retention.prunes:
        require_capability(capabilities.sessions, "sessions")
        require_capability(capabilities.retention, "retention")
    if config.webhooks:
        require_capability(capabilities.webhooks, "webhooks")


def _check_agents(
    agents: Mapping[str, AgentDefinition | Mapping[str, AgentDefinition]],
) -> dict[str, list[AgentDefinition]]:
    """Each agent's definitions by name, newest first (a definition and its ``previous``, or
    ``{version: definition}``): anything else would fail every attempt of every submission
    to it, so it is refused here, saying what came."""
    if not isinstance(agents, Mapping):
        raise TypeError(
            "agents must be a mapping of agent names to AgentDefinition, "
            f"got {type(agents).__name__}"
        )
    checked: dict[str, list[AgentDefinition]] = {}
    for name, given in agents.items():
        _check_name("agent", name)
        if not isinstance(given, AgentDefinition | Mapping):
            raise TypeError(
                f"agents[{name!r}] must be an AgentDefinition, got {type(given).__name__}"
                " (wrap a harness or an AgentSpec: "
                "AgentDefinition(lambda instance, env: AgentSpec(harness=...)))"
            )
        checked[name] = flatten_versions(name, given)
        for definition in checked[name]:
            if definition.priority is not None:
                try:
                    check_priority(definition.priority)
                except ValueError as exc:
                    raise ValueError(f"agents[{name!r}]: {exc}") from None
    return checked


class Runtime:
    """Durable agent sessions over a store (docs/architecture.md §6)."""

    def __init__(
        self,
        agents: Mapping[str, AgentDefinition | Mapping[str, AgentDefinition]],
        store: Store | str = DEFAULT_STORE_URL,
        *,
        config: RuntimeConfig | None = None,
        observers: Sequence[Observer] = (),
        interceptors: Sequence[Interceptor] = (),
        **settings: Any,
    ) -> None:
        self._definitions = _check_agents(agents)
        self.agents = {name: versions[0] for name, versions in self._definitions.items()}
        """Each agent's newest definition, by name (its older ones: :attr:`versions`)."""
        self._versions: AgentVersions | None = None
        self._store_source = store
        self._store: Store | None = store if not isinstance(store, str) else None
        self.config = replace(config or RuntimeConfig(), **settings)
        self.priority_aging = check_priority_aging(timedelta(seconds=self.config.priority_aging))
        """``RuntimeConfig.priority_aging``, checked (docs/priorities.md)."""
        self.subagents = SubagentPolicy.of(
            self.config.subagents, self.config.subagent_limits, list(self.agents)
        )
        """Who may delegate to whom (see :class:`SubagentPolicy`), checked once, here."""
        self.redact: Redactor = self.config.redact or SecretRedactor.from_env(
            os.environ, self.config.env
        )
        self.progress = ProgressHub()
        """Tool progress, live, for whoever follows a session (the HTTP streams do)."""
        self.metrics = EngineMetrics(self.config.metric_sinks)
        """What this process counted (docs/metrics.md): an observer of its own; read with
        :meth:`metrics_snapshot`."""
        self.instrumentation = Instrumentation(
            [log_event, *observers, self.progress, self.metrics, self._heard_for_webhooks],
            interceptors,
            redact=self.redact,
        )
        self.clock: Clock = self.config.clock or SystemClock()
        timeout = self.config.model_timeout
        self.model_calls = ModelCallPolicy(
            timeout=model_timeout_from_env() if timeout is None else timeout,
            retry=self.config.model_retry,
            clock=self.clock,
        )
        """How this runtime's model calls are bounded and retried (an agent's spec may
        override its timeout and retry policy)."""
        self._context: EngineContext | None = None
        self._coordinator: Coordinator | None = None
        self._book = ScheduleBook(
            self.config.schedules,
            self.agents,
            clock=self.clock,
            poll=self.config.schedule_poll,
            min_period=self.config.schedule_min_period,
        )
        self._scheduler: Scheduler | None = None
        self._pruner: Pruner | None = None
        self._outbox: Outbox | None = None
        self._webhook_sender: WebhookSender | None = None
        self._webhook_secret: str | None = None
        self._webhook_allow = networks_of(self.config.webhook_settings.allow)
        self._gauges: asyncio.Task[None] | None = None
        self._reading: asyncio.Future[MetricsSnapshot] | None = None
        self._runs = RunRegistry()
        self.steering = SteerWatches(poll=self.config.claim_interval, clock=self.clock)
        """What running attempts have heard of steering (see :mod:`._steering`)."""
        self.views = ViewCache()
        """This process's log views, by conversation (see :class:`ViewCache`)."""

    @classmethod
    def from_app(
        cls,
        app: App,
        store: Store | str | None = None,
        *,
        interceptors: Sequence[Interceptor] = (),
        **settings: Any,
    ) -> Runtime:
        """The runtime ``app`` describes (what ``tether serve --app`` and ``tether worker
        --app`` run): its agents, store, settings, observers and interceptors. ``store``
        (else the App's, else the default) and ``settings`` (:class:`RuntimeConfig` fields)
        override the App's; ``interceptors`` are added after its own.

        Example::

            async with Runtime.from_app(myapp.app, "memory://") as runtime:
                receipt = await runtime.dispatch("assistant", "acme", "hello")
        """
        return cls(
            app.agents,
            store if store is not None else app.store or DEFAULT_STORE_URL,
            config=app.runtime_config(**settings),
            observers=app.observers,
            interceptors=[*app.interceptors, *interceptors],
        )

    # --- lifecycle --------------------------------------------------------------------

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeClosed("the runtime has not been started")
        return self._store

    @property
    def versions(self) -> AgentVersions:
        """The versions of each agent this runtime runs, newest first (named at start, or by
        :meth:`resolve_versions`)."""
        if self._versions is None:
            raise RuntimeClosed("the runtime has not been started")
        return self._versions

    async def resolve_versions(self) -> AgentVersions:
        """Name the versions (see :meth:`AgentVersions.resolve`) if :meth:`start` has not."""
        if self._versions is None:
            self._versions = await AgentVersions.resolve(self._definitions, self.config.env)
        return self._versions

    @property
    def change_feed(self) -> ChangeFeed | None:
        """The store, if it has a change feed (wake-ups from other processes)."""
        return self._started_context().capabilities.change_feed

    @property
    def closing(self) -> bool:
        """Set once :meth:`close` began: nothing new is admitted or claimed."""
        return self._runs.closing

    @property
    def view_cache_bytes(self) -> int:
        """The encoded bytes of records the kept views may hold together (the newest view
        is kept whatever its size); views past it are dropped least recently used first
        and read again from the store when next needed."""
        return self.views.max_bytes

    @view_cache_bytes.setter
    def view_cache_bytes(self, value: int) -> None:
        self.views.max_bytes = value

    def _started_context(self) -> EngineContext:
        if self._context is None:
            raise RuntimeClosed("the runtime has not been started")
        return self._context

    async def start(self, *, worker: bool = True) -> None:
        """Open the store and (unless ``worker=False``, an API-only node) start the coordinator."""
        if self._context is not None:
            raise RuntimeError("the runtime is already started")
        if self.closing:
            raise RuntimeClosed("the runtime is closed")
        # Failpoints (docs/testing.md): a spec that does not parse fails the start before the
        # store is opened, and the store is wrapped only when some may fire.
        failpoints = arm_from_environment() or bool(ARMED)
        if self._store is None and isinstance(self._store_source, str):
            self._store = await open_store(self._store_source)
        if failpoints:
            self._store = with_failpoints(self.store, sleep=self.clock.sleep)
        store = self.store
        capabilities = StoreCapabilities.of(store)  # once: the context carries them
        _check_features(self.config, capabilities, self.agents)
        self._webhook_secret = (
            self.config.webhook_settings.secret
            or self.config.env.get(SECRET_VARIABLE)
            or os.environ.get(SECRET_VARIABLE)
            or None
        )
        allowed = self.config.env.get(ALLOW_VARIABLE) or os.environ.get(ALLOW_VARIABLE)
        if allowed:  # beside WebhookSettings.allow: what `tether serve` is given by the env
            extra = [cidr.strip() for cidr in allowed.split(",") if cidr.strip()]
            try:
                self._webhook_allow = (*self._webhook_allow, *networks_of(extra))
            except ValueError as exc:
                raise ValueError(f"{ALLOW_VARIABLE}: {exc}") from None
        if self.config.webhooks and self._webhook_secret is None:
            raise ValueError(
                f"webhook subscriptions need a signing secret: set {SECRET_VARIABLE} "
                "or WebhookSettings.secret"
            )
        versions = await self.resolve_versions()
        self._context = EngineContext(
            store=store,
            capabilities=capabilities,
            agents=self.agents,
            versions=versions,
            config=self.config,
            instrumentation=self.instrumentation,
            redact=self.redact,
            clock=self.clock,
            runs=self._runs,
            steering=self.steering,
            views=self.views,
            subagents=self.subagents,
            model_calls=self.model_calls,
            metrics=self.metrics,
            limits=LimitGate(
                capabilities.limits,
                agent_limits={
                    name: definition.limits
                    for name, definition in self.agents.items()
                    if definition.limits is not None
                },
                tenant_limits=self.config.tenant_limits,
                model_limits=self.config.model_limits,
                clock=self.clock,
                owner_id=self.config.owner_id,
                lease=self.config.lease,
                poll=self.config.limit_poll,
            ),
            tenant_budgets=TenantBudgetGate(
                capabilities.usage,
                self.config.tenant_budgets,
                clock=self.clock,
                owner_id=self.config.owner_id,
                lease=self.config.lease,
                poll=self.config.limit_poll,
            ),
        )
        if self.metrics.sinks:
            self._gauges = asyncio.create_task(self._feed_gauges(), name="tether-metric-gauges")
        if worker:
            self._coordinator = Coordinator(self._context)
            await self._coordinator.start()
            if capabilities.schedules is not None:
                self._scheduler = Scheduler(
                    self._book, capabilities.schedules, self.clock, self.dispatch
                )
                self._scheduler.start()
            retention = self.config.retention
            if retention is not None and retention.prunes:
                self._pruner = Pruner(self._context, retention)
                self._pruner.start()
        self._start_webhooks(worker=worker)

    def _start_webhooks(self, *, worker: bool) -> None:
        """The outbox, where the store keeps one, and (on a worker) its delivery loop."""
        context = self._started_context()
        outbox = context.capabilities.webhooks
        if outbox is None:
            return
        settings = self.config.webhook_settings
        self._outbox = Outbox(
            self.store, outbox, context.capabilities.gates, self.clock, self.config.webhooks
        )
        if worker and self._webhook_secret is not None:
            self._webhook_sender = WebhookSender(
                self._outbox,
                outbox,
                self.clock,
                settings,
                secret=self._webhook_secret,
                allow=self._webhook_allow,
                emit=self.instrumentation.emit,
            )
            self._webhook_sender.start()

    def _heard_for_webhooks(self, event: EngineEvent) -> None:
        if self._webhook_sender is not None:
            self._webhook_sender.heard(event)

    async def close(self) -> None:
        """Stop claiming, release running work without burning an attempt, close an owned store."""
        if self.closing:
            return
        self._runs.close()
        if self._gauges is not None:
            self._gauges.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gauges
            if self._reading is not None:  # a read under way finishes (its outcome is moot)
                with contextlib.suppress(Exception):
                    await self._reading
        if self._scheduler is not None:
            await self._scheduler.stop()
        if self._pruner is not None:
            await self._pruner.stop()
        if self._webhook_sender is not None:
            await self._webhook_sender.stop()
        if self._coordinator is not None:
            await self._coordinator.stop()
        await self._runs.bury_zombies(grace=1)
        if isinstance(self._store_source, str) and self._store is not None:
            await self._store.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def ready(self) -> None:
        """Return once the store has committed a small write (:meth:`Store.ping`); raise
        ``StoreUnavailable`` if it cannot write (a full disk, a lost database), or
        ``RuntimeClosed``. What ``/readyz`` asks.

        Example::

            await runtime.ready()
        """
        await self._check_open().ping()

    async def readiness(self) -> list[Dependency]:
        """Each dependency and its state (see :class:`Dependency`): the store (a heartbeat
        write), this worker's liveness lock (when it runs one on a store that offers them),
        and what a configured exporter reports. A ``RuntimeClosed`` or a store that cannot
        write is the store ``down``; any other failure of the write is raised (a defect).
        What ``/readyz`` answers.

        Example::

            if not all(dependency.ready for dependency in await runtime.readiness()):
                print("not ready")
        """
        found: list[Dependency] = []
        try:
            await self.ready()
            found.append(Dependency("store", "up", required=True))
        except RuntimeClosed:
            found.append(
                Dependency("store", "down", required=True, detail="the server is stopping")
            )
        except StoreUnavailable as exc:
            logger.warning("not ready: the store cannot write: %s", exc)
            found.append(
                Dependency("store", "down", required=True, detail="the store cannot write")
            )
        coordinator = self._coordinator
        context = self._context
        if coordinator is not None and context is not None and context.capabilities.liveness:
            held = coordinator.holds_liveness
            found.append(
                Dependency(
                    "liveness",
                    "up" if held else "down",
                    required=True,
                    detail=None if held else "this worker holds no liveness lock",
                )
            )
        for reporter in (*self.config.metric_sinks, *self.instrumentation.interceptors):
            if isinstance(reporter, HealthReporter):
                found.append(reporter.health())
        return found

    async def metrics_snapshot(self) -> MetricsSnapshot:
        """What this process counted, with the store's state read now (queued, running,
        waiting and gated submissions, cluster-wide: one grouped count, on a store that
        offers ``versions``) and this process's live streams. What ``/metrics`` renders.

        Example::

            snapshot = await runtime.metrics_snapshot()
            queued = sum(snapshot.gauge("tether_submissions_queued").values())
        """
        offered = self._offered()
        versions = offered.versions
        gauges = store_gauges(await versions.version_counts()) if versions is not None else {}
        if offered.timers is not None:
            due = await offered.timers.next_due()
            if due is not None:
                until = (due - self.clock.now()).total_seconds()
                gauges["tether_timers_next_due_seconds"] = {(): until}
        queued = gauges.get("tether_submissions_queued") if versions is not None else None
        gauges["tether_submissions_limited"] = await self._limited(queued)
        gauges["tether_sse_subscribers"] = {(): float(self.progress.followers)}
        gauges["tether_attempts_running"] = {(): float(self._runs.running)}
        return self.metrics.snapshot(gauges=gauges, owner_id=self.config.owner_id)

    async def _limited(
        self, queued: Mapping[tuple[str, ...], float] | None
    ) -> dict[tuple[str, ...], float]:
        """The queued submissions a limit of runs in flight holds back now, by agent and by
        whose limit (the ``tether_submissions_limited`` gauge). An agent at its limit holds
        back every queued run of its own: ``queued`` (by agent, the store's grouped count)
        says how many. Only while a tenant is at its limit (or without that count) are the
        queued submissions listed, to find that tenant's."""
        context = self._context
        if context is None or not context.limits.limits_runs:
            return {}
        held = await context.limits.held_back()
        if held is None:
            return {}
        if queued is not None and not held.tenants:
            return {
                (labels[0], "agent"): count
                for labels, count in queued.items()
                if labels[0] in held.agents and count
            }
        return limited_gauge(held, await self.store.list_submissions(SubmissionStatus.QUEUED))

    async def _feed_gauges(self) -> None:
        """Hands the store's state to the metric sinks every ``metrics_interval``. Each read
        is a task of its own, shielded: stopping the feed never cuts a query short (a
        PostgreSQL connection cancelled mid-query is not returned to its pool whole)."""
        while True:
            self._reading = asyncio.ensure_future(self.metrics_snapshot())
            try:
                snapshot = await asyncio.shield(self._reading)
                for sink in self.metrics.sinks:
                    sink.gauges(snapshot)
            except (StoreUnavailable, RuntimeClosed) as exc:
                logger.warning("metrics: the store's state could not be read: %s", exc)
            except Exception:  # a sink's defect never stops the runtime
                logger.exception("metrics: feeding the sinks failed")
            await self.clock.sleep(self.config.metrics_interval)

    async def revoke(self, credential_id: str) -> None:
        """Refuse a credential the application issued (by its id) from now on: in every
        process on this store, and after restarts. The web console's sign-out revokes its
        cookie so (docs/console.md).

        Example::

            await runtime.revoke(session_id)
            assert await runtime.is_revoked(session_id)
        """
        await revoke(require_capability(self._offered().attachments, "attachments"), credential_id)

    async def is_revoked(self, credential_id: str) -> bool:
        """Whether :meth:`revoke` was called for ``credential_id``, by any process on this
        store (one read by primary key; never, on a store without attachments)."""
        attachments = self._offered().attachments
        return attachments is not None and await is_revoked(attachments, credential_id)

    def _check_open(self) -> Store:
        if self.closing:
            raise RuntimeClosed("the runtime is closed")
        return self.store

    def _offered(self) -> StoreCapabilities:
        """What the open store offers beyond the core: detected when the runtime started
        (before, a runtime given a store object finds it out per call)."""
        store = self._check_open()
        context = self._context
        return context.capabilities if context is not None else StoreCapabilities.of(store)

    def _wake(self) -> None:
        if self._coordinator is not None:
            self._coordinator.wake.set()

    def view(self, conversation_id: str) -> LogView:
        """This process's incremental view of a conversation (kept for the most recent ones,
        bounded by count and by the encoded size of their records)."""
        return self.views.get(conversation_id)

    # --- admission --------------------------------------------------------------------

    async def dispatch(
        self,
        agent: str,
        instance: str,
        message: Inbound | str | Mapping[str, Any],
        *,
        session: str = "default",
        dispatch_id: str | None = None,
        multitask: Multitask = "enqueue",
        trace: Mapping[str, str] | None = None,
        tenant: str | None = None,
        budget: Budget | Mapping[str, Any] | None = None,
        run_at: datetime | None = None,
        after: timedelta | float | None = None,
        priority: int | None = None,
        callback: Callback | Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Receipt:
        """Admit a message for ``agent/instance/session``; durable when this returns.

        ``dispatch_id`` makes it idempotent within the session key. ``multitask`` says what
        to do if the session is busy: ``enqueue`` (run after), ``reject`` (``SessionBusy``),
        ``interrupt`` (abort what runs, then run), ``steer`` (join the running execution).
        ``trace`` is the caller's W3C trace context (``traceparent``, ``tracestate``): every
        attempt, recovered ones included, joins that trace (a malformed one is ignored).
        ``tenant`` is the caller's (``None``: an operator's): a new session is that tenant's,
        and another tenant's session (or one of no tenant) is ``ConversationNotFound``, with
        nothing admitted nor interrupted (see ``NewSubmission.tenant``). ``budget`` limits
        this submission's spending, over its agent's and the application's, limit by limit
        (docs/budgets.md); it is stored with the message. ``run_at`` (timezone-aware) or
        ``after`` (a delay, or seconds) delays it: it is admitted ``scheduled``, durably,
        and queued at that time, holding its session's later submissions behind it; an
        abort settles it ``aborted`` without running it (docs/timers.md). Both, a past
        time or one too far (``MAX_DELAY``) are ``InvalidDispatch``, nothing written; only
        ``enqueue`` delays. ``priority`` (``PRIORITY_MIN..PRIORITY_MAX``, higher first;
        ``None``: the agent's, else 0) orders its claim among other sessions' queued
        submissions, aged by ``RuntimeConfig.priority_aging`` (docs/priorities.md);
        ``InvalidDispatch`` out of range. ``callback`` (a :class:`Callback`, or
        ``{"url": ..., "events": [...]}``) has the submission's ``settled``,
        ``approval_requested`` and ``input_requested`` events POSTed there, signed, from a
        durable outbox (docs/how-to/webhooks.md); a URL that is not ``http(s)`` or whose host
        is a private, loopback or link-local address (unless ``WebhookSettings.allow`` holds
        it), or a runtime without a signing secret, is ``InvalidDispatch``, nothing written.
        ``metadata`` is merged into the session's
        (an RFC 7396 merge patch, as :meth:`patch_session_metadata`): a new session starts
        with it; a patch out of bounds is ``InvalidMetadata``, nothing admitted.

        Example::

            receipt = await runtime.dispatch("support", "acme", "hello", tenant="acme")
            await runtime.dispatch("support", "acme", "hi", metadata={"customer": "acme"})
            await runtime.dispatch("support", "acme", "go", budget=Budget(model_calls=5))
            await runtime.dispatch("support", "acme", "remind me", after=timedelta(days=1))
            await runtime.dispatch("support", "acme", "urgent", priority=10)
            await runtime.dispatch("support", "acme", "refund", callback={
                "url": "https://example.com/hooks", "events": ["settled"]})
        """
        self._check_open()
        if agent not in self.agents:
            raise UnknownAgent(agent)
        _check_name("instance", instance)
        _check_name("session", session)
        if dispatch_id is not None and not (0 < len(dispatch_id) <= _NAME_LIMIT):
            raise InvalidDispatch(f"must be 1-{_NAME_LIMIT} characters", field="dispatchId")
        if priority is not None:
            try:
                check_priority(priority)
            except ValueError as exc:
                raise InvalidDispatch(str(exc), field="priority") from None
        inbound = parse_inbound(message)
        if budget is not None:
            inbound = parse_inbound({**inbound.to_json_object(), "budget": _budget_wire(budget)})
        due = due_time(self.clock.now(), run_at, after)
        if due is not None:
            if multitask != "enqueue" or inbound.kind not in ("user", "signal"):
                raise InvalidDispatch("only a user message or a signal, enqueued", field="runAt")
            require_capability(self._offered().timers, "timers")
        key = SessionKey(agent, instance, session)
        if multitask != "enqueue" and inbound.kind in ("user", "signal"):
            busy = await self._unsettled(key, tenant)
            if busy and multitask == "reject":
                raise SessionBusy(f"session {key} is running {busy[0].id}")
            if busy and multitask == "interrupt":
                for submission in busy:
                    await self._cancel(submission)
            if busy and multitask == "steer":
                inbound = inbound.model_copy(update={"kind": "steer", "budget": None})
        hook = None if callback is None else await self._check_callback(callback)
        patched = False
        if metadata is not None:
            patched = await self._patch_before_admission(key, metadata, tenant)
        receipt = await self._admit(
            key, inbound, dispatch_id, trace_context(trace), tenant, due, priority
        )
        if metadata is not None and not patched:  # a new session's: its first metadata
            index = require_capability(self._offered().sessions, "sessions")
            await index.patch_session_metadata(receipt.conversation_id, metadata)
        await self._subscribe(key, receipt, hook)
        return receipt

    async def _check_callback(self, callback: Callback | Mapping[str, Any]) -> Callback:
        hook = parse_callback(callback)
        require_capability(self._offered().webhooks, "webhooks")
        if self._webhook_secret is None:
            raise InvalidDispatch(
                f"no webhook signing secret is configured ({SECRET_VARIABLE})", field="callback"
            )
        await check_webhook_url(hook.url, self._webhook_allow)
        return hook

    async def _subscribe(self, key: SessionKey, receipt: Receipt, hook: Callback | None) -> None:
        """Hold the outbox rows of the submission's webhooks (its callback, its agent's
        subscriptions), if it has any: after the admission, so a dispatch that fails in
        between (its caller has no answer) is retried whole, with its ``dispatch_id``."""
        outbox = self._outbox
        if outbox is None or not targets_of(key.agent, hook, self.config.webhooks):
            return
        submission = await self.store.get_submission(receipt.submission_id)
        await outbox.subscribe(submission, hook)
        if self._webhook_sender is not None:
            self._webhook_sender.nudge()

    async def _patch_before_admission(
        self, key: SessionKey, metadata: Mapping[str, Any], tenant: str | None
    ) -> bool:
        """Merge a dispatch's ``metadata`` into its session's, if the session has a
        conversation the caller may admit into: before the admission, so that a merge out
        of bounds admits nothing. Whether it did (if not, the admission creates the
        conversation, and its metadata is the patch, checked here)."""
        merge_metadata({}, metadata)  # its shape, before anything is written
        index = require_capability(self._offered().sessions, "sessions")
        try:
            conversation = await self.store.find_conversation(key)
        except ConversationNotFound:
            return False
        if tenant is not None and conversation.tenant != tenant:
            return False  # the admission refuses it
        await index.patch_session_metadata(conversation.id, metadata)
        return True

    async def _admit(
        self,
        key: SessionKey,
        inbound: Inbound,
        dispatch_id: str | None,
        trace: Mapping[str, str] | None = None,
        tenant: str | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
    ) -> Receipt:
        tenant = self._tenant_of(key, tenant)
        now = self.clock.now()
        if priority is None:  # the agent's default, else 0
            priority = self.agents[key.agent].priority or 0
        new = NewSubmission(
            id=new_ulid(),
            key=key,
            conversation_id=new_ulid(),
            input=inbound.to_json_object(),
            created_at=now,
            dispatch_id=dispatch_id,
            trace=trace,
            tenant=tenant,
            by=inbound.by,
            run_at=run_at,
            priority=priority,
            priority_aging=self.priority_aging,
        )
        coordinator = self._coordinator if run_at is None else None  # never claimed at once
        with (
            coordinator.reserve() if coordinator is not None else contextlib.nullcontext(False)
        ) as room:
            attempt_id = new_ulid() if room else None
            fast = self._offered().admit_and_claim if coordinator is not None else None
            slots = None
            # A runtime not started yet has no coordinator, so nothing is claimed at once.
            limits = self._started_context().limits if fast is not None else None
            if limits is not None and attempt_id is not None and limits.may_hold_back(key.agent):
                # Limits (docs/limits.md): the claim at admission takes the run's slots in
                # its commit, or leaves it queued for a claim once a slot is free.
                slots = limits.claim_slots()
                if slots is None:
                    fast = None  # limits kept in this process alone: a claim decides
            started = self.clock.monotonic()
            if attempt_id is not None and coordinator is not None and fast is not None:
                admission = await self._admit_and_claim(fast, coordinator, new, attempt_id, slots)
            else:
                admission = await self.store.admit(new)
            self.metrics.commit("admit", self.clock.monotonic() - started)
            submission = admission.submission
            claimed = attempt_id is not None and submission.attempt_id == attempt_id
            correlation = Correlation.of(submission)
            try:
                await self.instrumentation.emit(
                    SubmissionAdmitted(
                        correlation, input=dict(submission.input), created=admission.created
                    )
                )
            finally:  # admitted, then claimed: observers hear it in that order
                if claimed and coordinator is not None:
                    coordinator.adopt(submission, slotted=slots is not None)
            if run_at is not None:
                self._runs.due(run_at)  # this process's claim loop sleeps no longer than that
            elif not claimed:
                self._wake()
            if inbound.kind in ("steer", "follow_up"):
                self.steering.heard(submission.conversation_id)  # durable now: worth a look
        return Receipt(submission.id, submission.conversation_id, key.session, admission.created)

    def _tenant_of(self, key: SessionKey, tenant: str | None) -> str | None:
        """The tenant an admission of ``tenant`` into ``key`` is made for, by the
        application's map of instances to tenants (``RuntimeConfig.tenant_of``)."""
        mapping = self.config.tenant_of
        mapped = None if mapping is None else mapping(key.agent, key.instance)
        if mapped is None:
            return tenant
        if tenant is not None and tenant != mapped:
            raise ConversationNotFound(str(key))  # to another tenant, it does not exist
        return mapped

    async def _admit_and_claim(
        self,
        store: AdmitAndClaimStore,
        coordinator: Coordinator,
        new: NewSubmission,
        attempt_id: str,
        slots: ClaimSlots | None,
    ) -> Admission:
        """Admit, claiming in the same commit if the session is free (and, with ``slots``,
        its limits' slots are); the caller runs what was claimed. The commit is shielded: a
        caller that gives up meanwhile (a shutdown, a client gone) must not leave a claim
        that nobody runs, so it is run once known."""
        claiming = asyncio.ensure_future(
            store.admit_and_claim(
                new,
                attempt_id=attempt_id,
                owner_id=self.config.owner_id,
                lease_expires_at=new.created_at + timedelta(seconds=self.config.lease),
                now=new.created_at,
                serves=coordinator.serves,
                slots=slots,
            )
        )
        try:
            return await asyncio.shield(claiming)
        except asyncio.CancelledError:
            adopt = functools.partial(_adopt_claimed, coordinator, attempt_id, slots is not None)
            claiming.add_done_callback(adopt)
            raise
        except BaseException:
            if slots is not None:  # what it was to give back goes with the next claim
                self._started_context().limits.claim_failed(slots)
            raise

    async def _unsettled(self, key: SessionKey, tenant: str | None = None) -> list[Submission]:
        """The session's unsettled submissions (none for a session not begun);
        ``ConversationNotFound`` for one that is not ``tenant``'s (``None``, an operator,
        may touch any): an interrupt, a steer or an abort of it touches nothing."""
        try:
            conversation = await self.store.find_conversation(key)
        except ConversationNotFound:
            return []
        _check_tenant(conversation, tenant)
        return await self.store.list_submissions(conversation_id=conversation.id, unsettled=True)

    async def _tenants_conversation(self, key: SessionKey, tenant: str | None) -> Conversation:
        """The session's conversation if it is ``tenant``'s (or ``tenant`` is ``None``);
        ``ConversationNotFound`` otherwise, as if it did not exist."""
        return _check_tenant(await self.store.find_conversation(key), tenant)

    async def _cancel(self, submission: Submission, by: Actor | None = None) -> None:
        await self.store.request_cancel(submission.id, now=self.clock.now(), by=by)
        self._runs.abort(submission.id)

    async def steer(
        self,
        agent: str,
        instance: str,
        message: Inbound | str | Mapping[str, Any],
        *,
        session: str = "default",
        tenant: str | None = None,
    ) -> Receipt:
        """Deliver a message into the running execution at its next safe point (durable).
        ``tenant``: as :meth:`dispatch`'s (another tenant's session is not found)."""
        return await self._inject("steer", agent, instance, message, session, tenant)

    async def follow_up(
        self,
        agent: str,
        instance: str,
        message: Inbound | str | Mapping[str, Any],
        *,
        session: str = "default",
        tenant: str | None = None,
    ) -> Receipt:
        """Queue a message for the running execution to take once its current answer is done.
        ``tenant``: as :meth:`dispatch`'s (another tenant's session is not found)."""
        return await self._inject("follow_up", agent, instance, message, session, tenant)

    async def _inject(
        self,
        kind: str,
        agent: str,
        instance: str,
        message: Inbound | str | Mapping[str, Any],
        session: str,
        tenant: str | None = None,
    ) -> Receipt:
        self._check_open()
        if agent not in self.agents:
            raise UnknownAgent(agent)
        inbound = parse_inbound(message)
        key = SessionKey(agent, instance, session)
        busy = [
            s
            for s in await self._unsettled(key, tenant)
            if Inbound.model_validate(s.input).kind in ("user", "signal")
        ]
        if not busy:
            raise NoRunInFlight(f"nothing is running in session {key}")
        return await self._admit(key, inbound.model_copy(update={"kind": kind}), None, None, tenant)

    async def abort(
        self,
        agent: str,
        instance: str,
        *,
        session: str = "default",
        tenant: str | None = None,
        by: Actor | None = None,
    ) -> list[str]:
        """Abort every unsettled submission of the session (each settles ``aborted``).
        ``tenant``: another tenant's session is ``ConversationNotFound``, nothing aborted.
        ``by``: who aborts (a verified identity), kept with the cancel and recorded on each
        aborted settlement (``abortedBy``)."""
        self._check_open()
        busy = await self._unsettled(SessionKey(agent, instance, session), tenant)
        for submission in busy:
            await self._cancel(submission, by)
        self._wake()
        return [s.id for s in busy]

    async def compact(
        self,
        agent: str,
        instance: str,
        *,
        session: str = "default",
        dispatch_id: str | None = None,
        tenant: str | None = None,
    ) -> Receipt:
        """Queue a compaction of the session's history (it runs in order with the messages).
        ``tenant``: another tenant's session is ``ConversationNotFound``."""
        self._check_open()
        if agent not in self.agents:
            raise UnknownAgent(agent)
        key = SessionKey(agent, instance, session)
        # ConversationNotFound: nothing to compact (or not the tenant's to)
        await self._tenants_conversation(key, tenant)
        return await self._admit(key, Inbound(kind="compact"), dispatch_id, None, tenant)

    # --- reading ----------------------------------------------------------------------

    async def submission(self, submission_id: str) -> SubmissionInfo:
        store = self._check_open()
        submission = await store.get_submission(submission_id)
        parents = self._offered().children
        waits = await QueuedWaits(self._started_context()).of(submission)
        return SubmissionInfo(
            submission,
            await store.list_attempts(submission_id),
            await parents.list_children(submission_id) if parents else [],
            waits_for_a_worker=waits is not None and waits.reason == NO_WORKER_FOR_VERSION,
            waits_for_a_limit=waits is not None and waits.reason == LIMIT,
            held_by=None if waits is None else waits.held_by,
        )

    async def open_submissions(
        self,
        agent: str,
        instance: str,
        *,
        session: str = "default",
        tenant: str | None = None,
        limit: int = 100,
    ) -> list[SubmissionInfo]:
        """A session's unsettled submissions, oldest first (the first ``limit``), each as
        :meth:`submission` tells it (a queued one held back by a limit says so); none for a
        session not begun, ``ConversationNotFound`` for another ``tenant``'s. What the
        console shows of a session's runs: scheduled, queued, running, waiting.

        Example::

            for info in await runtime.open_submissions("support", "acme"):
                print(info.submission.id, info.status, info.submission.wait_until)
        """
        found = await self._unsettled(SessionKey(agent, instance, session), tenant)
        infos = []
        for submission in found[:limit]:
            with contextlib.suppress(SubmissionNotFound):  # erased meanwhile
                infos.append(await self.submission(submission.id))
        return infos

    async def version_states(self, agent: str | None = None) -> list[VersionState]:
        """Each agent's versions (``agent``'s only, if given) with their live workers,
        unsettled runs and parked gates: a version with nothing left can be retired."""
        return await version_states(self._started_context(), agent)

    async def upgrade_parked(
        self, agent: str, *, from_version: str, to_version: str, actor: str | None = None
    ) -> list[str]:
        """Move ``agent``'s parked runs from ``from_version`` to ``to_version`` (one this
        runtime runs), each with an audit record in its log; the ids of those moved."""
        if agent not in self.agents:
            raise UnknownAgent(agent)
        return await upgrade_parked(
            self._started_context(),
            agent,
            from_version=from_version,
            to_version=to_version,
            actor=actor,
        )

    async def sessions(
        self,
        *,
        agent: str | None = None,
        instance: str | None = None,
        status: SessionState | None = None,
        limit: int = 50,
        cursor: str | None = None,
        usage: bool = False,
        tenant: str | None = None,
        metadata: Mapping[str, str] | None = None,
        text: str | None = None,
        since: datetime | None = None,
    ) -> SessionPage:
        """Sessions newest activity first, each with where it stands (see
        :class:`SessionPage`); ``usage`` also totals each one's model calls (it reads their
        logs). ``instance`` needs ``agent``. ``tenant`` lists only that tenant's (``None``:
        every session, an operator's view); a cursor of another tenant's page lists only
        this one's past it. The search filters (docs/search.md): ``metadata`` keeps the
        sessions whose metadata holds each key with that text form, ``text`` those one of
        whose messages holds every word of it, ``since`` those active at that time or later.

        Example::

            page = await runtime.sessions(tenant="acme", limit=20)
            found = await runtime.sessions(metadata={"customer": "acme"}, text="refund")
        """
        return await session_page(
            self._started_context(),
            agent=agent,
            instance=instance,
            status=status,
            limit=limit,
            cursor=cursor,
            usage=usage,
            tenant=tenant,
            metadata=metadata,
            text=text,
            since=since,
        )

    async def patch_session_metadata(
        self,
        agent: str,
        instance: str,
        patch: Mapping[str, Any],
        *,
        session: str = "default",
        tenant: str | None = None,
    ) -> dict[str, MetadataValue]:
        """Apply an RFC 7396 merge ``patch`` to a session's metadata (a key set to ``None``
        is removed) and return the metadata it leaves. ``InvalidMetadata`` (nothing changed)
        for a patch or a result out of bounds (``tether.store.METADATA_LIMITS``);
        ``ConversationNotFound`` for a session that has no conversation, or is not
        ``tenant``'s.

        Example::

            await runtime.patch_session_metadata("support", "acme", {"tier": "gold"})
        """
        return await patch_session_metadata(
            self._started_context(), SessionKey(agent, instance, session), patch, tenant=tenant
        )

    async def check_upgrade(
        self,
        *,
        agent: str | None = None,
        version: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[UpgradeCheck]:
        """The deploy gate: up to ``limit`` recorded sessions, newest activity first (of
        ``agent``; of those whose latest execution ran ``version``; active at or after
        ``since``), each replayed against the newest version of its agent this runtime runs,
        its pending execution up to where it waits. No model call, no tool call, nothing
        written; a runtime started with ``worker=False`` (against a replica or a restored
        backup) is enough. Sessions of agents this runtime does not run are passed over.
        Needs the ``sessions`` capability.

        Example::

            await runtime.start(worker=False)
            checks = await runtime.check_upgrade(since=datetime.now(UTC) - timedelta(days=7))
            failing = [c for c in checks if c.blocks]  # diverged, and a run would resume it
        """
        return await check_upgrade(
            self._started_context(), agent=agent, version=version, since=since, limit=limit
        )

    async def erase_session(
        self,
        agent: str,
        instance: str,
        *,
        session: str = "default",
        force: bool = False,
        by: Actor | None = None,
    ) -> ErasedSession:
        """Erase a session for good: its log, submissions, snapshot and the attachments no
        other log references. ``SessionBusy`` if anything of it is unsettled, unless
        ``force``, which aborts that first (waiting up to ``shutdown_timeout`` for it to
        settle). ``ConversationNotFound`` for a session that has no conversation. ``by``:
        who erases it (a verified identity), logged on ``tether.engine.events`` and
        returned (``ErasedSession.by``); the store keeps nothing of the session.

        Example::

            erased = await runtime.erase_session("support", "acme", session="s1", force=True)
        """
        return await erase_session(
            self._started_context(),
            SessionKey(agent, instance, session),
            force=force,
            settle_within=self.config.shutdown_timeout,
            by=by,
        )

    async def tree(self, submission_id: str) -> SubmissionTree:
        """The submission's subagent tree: its children, theirs, with statuses and usage
        (``SubmissionNotFound`` for an unknown id)."""
        store = self._check_open()
        submission = await store.get_submission(submission_id)
        return await submission_tree(store, self._offered().children, self.views, submission)

    async def abort_submission(
        self, submission_id: str, *, by: Actor | None = None
    ) -> SubmissionInfo:
        """Abort one submission (an operator's cancel): it settles ``aborted`` at its next
        safe point, wherever it runs. A child's parent gets an error result for the task
        and goes on. A settled submission is left as it is. ``SubmissionNotFound`` for an
        unknown id. ``by``: who aborts, as :meth:`abort`'s.

        Example::

            info = await runtime.abort_submission(child_id, by=Actor(subject="ops-1"))
        """
        store = self._check_open()
        submission = await store.get_submission(submission_id)
        if submission.status is not SubmissionStatus.SETTLED:
            await self._cancel(submission, by)
            self._wake()
        return await self.submission(submission_id)

    async def wait(self, submission_id: str) -> dict[str, JsonValue]:
        """The settled payload, once the submission settles; works across processes and
        restarts (it reads the store; a store with a change feed wakes it at once, others
        are polled). Bound it with ``asyncio.timeout``."""
        return await wait_settled(self._check_open(), self.change_feed, self._runs, submission_id)

    async def records(
        self, conversation_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[Record]:
        check_seq(after, field="after")
        return await self._check_open().read(conversation_id, after_seq=after, limit=limit)

    async def messages(self, conversation_id: str) -> list[Message]:
        """The session's history as the model sees it next turn (compactions applied).

        Example::

            conversation = await runtime.conversation("assistant", "acme")
            for message in await runtime.messages(conversation.id):
                print(message.role, message.text)
        """
        view = await self.views.refreshed(self._check_open(), conversation_id)
        return view.messages()

    async def verify(self, conversation_id: str) -> int:
        """Re-derive a conversation's whole hash chain; the number of records it holds
        (``LogTampered`` if a record was altered, ``ConversationNotFound``)."""
        return await self._check_open().verify(conversation_id)

    async def wait_for_append(self, conversation_id: str, *, after: int) -> int:
        """Wait until the conversation's log passes seq ``after``; return its new head.
        Wakes at once for appends in this process and, with a change feed, in others.
        Bound it with ``asyncio.timeout``."""
        check_seq(after, field="after")
        return await self._check_open().wait_for_append(conversation_id, after_seq=after)

    async def at_rest(self, conversation_id: str) -> bool:
        """Whether nothing of the conversation is queued or running: every submission is
        settled or parked (for a human, or for a child task, which may take days)."""
        unsettled = await self._check_open().list_submissions(
            conversation_id=conversation_id, unsettled=True
        )
        return all(s.status in _AT_REST for s in unsettled)

    async def usage(self, conversation_id: str, *, submission_id: str | None = None) -> UsageTotals:
        """Token usage and cost of a session's model calls, or of one submission's."""
        view = await self.views.refreshed(self._check_open(), conversation_id)
        return total_usage(view.records, submission_id=submission_id)

    async def conversation_by_id(self, conversation_id: str) -> Conversation:
        """The conversation of that id, its tenant included (``ConversationNotFound``)."""
        return await self._check_open().get_conversation(conversation_id)

    async def conversation(
        self, agent: str, instance: str, *, session: str = "default"
    ) -> Conversation:
        """The conversation behind a session key (``UnknownAgent``, ``ConversationNotFound``)."""
        store = self._check_open()
        if agent not in self.agents:
            raise UnknownAgent(agent)
        return await store.find_conversation(SessionKey(agent, instance, session))

    async def created_by(self, conversation: Conversation) -> Actor | None:
        """Who created the session of ``conversation``, as its ``conversation_created``
        record says (the verified identity whose message created it, or who forked it);
        ``None`` when no authenticated request did (a schedule, a library call, a subagent,
        a session older than the record's ``by``). One read of one record: a fork's own
        record follows the records it copied; retention's ``log_truncated`` keeps it.

        Example::

            conversation = await runtime.conversation("assistant", "acme")
            owner = await runtime.created_by(conversation)
        """
        parent = conversation.parent
        own = parent.seq + 1 if parent is not None and parent.reason == "fork" else 1
        records = await self._check_open().read(conversation.id, after_seq=own - 1, limit=1)
        if not records:
            return None
        payload = records[0].payload
        if isinstance(payload, ConversationCreated):
            return payload.by
        if isinstance(payload, LogTruncated) and payload.created is not None:
            kept = payload.created.get("payload")
            by = kept.get("by") if isinstance(kept, dict) else None
            return None if by is None else Actor.model_validate(by)
        return None

    # --- schedules --------------------------------------------------------------------

    async def add_schedule(self, schedule: Schedule, *, tenant: str | None = None) -> ScheduleInfo:
        """Keep a schedule in the store: every worker on it fires its windows, each once
        (docs/schedules.md). Idempotent for the same definition; ``ScheduleConflict`` for
        an id another definition (or the configuration, or another tenant) has,
        ``UnknownAgent``. It belongs to ``tenant``, and its windows are dispatched as that
        tenant's (into a session of another tenant, they are refused).

        Example::

            info = await runtime.add_schedule(
                Schedule("digest", "acme", cron="0 9 * * *", timezone="Europe/Paris",
                         body="Send the daily digest")
            )
            print(info.id, info.next_fire_at)
        """
        schedules = require_capability(self._offered().schedules, "schedules")
        info = await self._book.add(schedules, schedule, self.clock.now(), tenant)
        if self._scheduler is not None:
            self._scheduler.wake.set()
        return info

    async def schedules(self, *, tenant: str | None = None) -> list[ScheduleInfo]:
        """Every schedule, each with the start of its next window: the configuration's,
        then the store's (oldest first). With ``tenant``, only the store's of that tenant
        (the configuration's are no tenant's)."""
        schedules = require_capability(self._offered().schedules, "schedules")
        return await self._book.list(schedules, self.clock.now(), tenant)

    async def delete_schedule(self, schedule_id: str, *, tenant: str | None = None) -> None:
        """Forget a durable schedule (``ScheduleNotFound``, also for another tenant's when
        ``tenant`` is given; ``ScheduleConflict`` for one of the configuration). What its
        windows admitted stays admitted."""
        await self._book.delete(
            require_capability(self._offered().schedules, "schedules"), schedule_id, tenant
        )

    # --- retention --------------------------------------------------------------------

    # --- outbound webhooks ---------------------------------------------------------------

    def _webhook_store(self) -> WebhookStore:
        self._check_open()
        return require_capability(self._offered().webhooks, "webhooks")

    async def webhook_deliveries(
        self,
        *,
        status: WebhookStatus | None = None,
        submission_id: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[WebhookDelivery]:
        """The outbox's deliveries, oldest first (docs/how-to/webhooks.md): ``tenant``'s
        only (``None``: an operator's, every one), up to ``limit``
        (``MAX_WEBHOOK_PAGE`` at most), those after the delivery ``after``.

        Example::

            failed = await runtime.webhook_deliveries(status=WebhookStatus.FAILED)
        """
        if not 1 <= limit <= MAX_WEBHOOK_PAGE:
            raise ValueError(f"limit must be 1-{MAX_WEBHOOK_PAGE}")
        return await self._webhook_store().list_webhook_deliveries(
            status=status, tenant=tenant, submission_id=submission_id, limit=limit, after=after
        )

    async def webhook_delivery(
        self, delivery_id: str, *, tenant: str | None = None
    ) -> WebhookDelivery:
        """One delivery; ``WebhookNotFound`` if none has the id (or it is not ``tenant``'s).

        Example::

            delivery = await runtime.webhook_delivery("wh_4f1c...")
        """
        found = await self._webhook_store().get_webhook_delivery(delivery_id)
        if found is None or (tenant is not None and found.tenant != tenant):
            raise WebhookNotFound(delivery_id)
        return found

    async def resend_webhook(
        self, delivery_id: str, *, tenant: str | None = None
    ) -> WebhookDelivery:
        """Send a delivery again, now, with the same id and body (its attempts counted from
        0 again): a ``failed`` one, or a delivered one a receiver lost. A ``held`` or
        ``closed`` one (a subscription, not a delivery) is left as it is, returned.

        Example::

            again = await runtime.resend_webhook("wh_4f1c...")
        """
        await self.webhook_delivery(delivery_id, tenant=tenant)
        again = await self._webhook_store().resend_webhook_delivery(
            delivery_id, now=self.clock.now()
        )
        if again is None:
            raise WebhookNotFound(delivery_id)
        if self._webhook_sender is not None:
            self._webhook_sender.nudge()
        return again

    async def prune(
        self, retention: Retention | None = None, *, dry_run: bool = False
    ) -> PruneReport:
        """One retention pass over every session (docs/retention.md): by ``retention``, or
        the configuration's. With ``dry_run`` nothing is removed; the report says what would.

        Example::

            report = await runtime.prune(Retention(keep_records=10_000), dry_run=True)
            for outcome in report.outcomes:
                print(outcome.action, outcome.key, outcome.removed)
        """
        self._check_open()
        policy = retention or self.config.retention or Retention()
        return await prune(self._started_context(), policy, dry_run=dry_run)

    # --- approvals and forks ----------------------------------------------------------

    async def approvals(
        self,
        *,
        status: GateStatus | None = GateStatus.PENDING,
        agent: str | None = None,
        instance: str | None = None,
        tool: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        tenant: str | None = None,
    ) -> ApprovalPage:
        """A page of approval gates, oldest request first, from the store's gate index (no
        log is read): by default those waiting for a decision; ``status=None`` lists every
        status, ``GateStatus.DECIDED`` the decisions made (the audit trail). ``cursor`` is a
        page's ``next_cursor`` (``InvalidCursor`` for anything else); ``limit`` 1..1000.
        ``tenant`` lists only that tenant's gates (``None``: every gate).

        Example::

            page = await runtime.approvals(agent="support")
            for gate in page.gates:
                await runtime.approve(gate.approval_id, "approve", approver="ann")
        """
        return await approval_page(
            require_capability(self._offered().gates, "gates"),
            kind=GateKind.APPROVAL,
            status=status,
            agent=agent,
            instance=instance,
            tool=tool,
            limit=limit,
            cursor=cursor,
            tenant=tenant,
        )

    async def approve(
        self,
        approval_id: str,
        decision: Decision,
        *,
        approver: str,
        reason: str | None = None,
        args: dict[str, JsonValue] | None = None,
        by: Actor | None = None,
    ) -> Record:
        """Decide a parked tool call and requeue its submission, in one commit.

        ``approver`` is the name the decision is shown under; ``by`` who decided, as the
        server verified them (``tether.auth``), recorded with it.

        Idempotent: the same decision again (concurrently too) returns the same record; a
        different one raises ``ApprovalConflict``. An ``edit`` whose ``args`` do not fit the
        tool's parameters schema raises ``InvalidEditArgs`` and writes nothing.
        """
        journal = await gate_journal(
            self._check_open(), self._offered(), self.view, approval_id, ApprovalNotFound
        )
        record = await journal.approve(
            approval_id, decision, approver=approver, reason=reason, args=args, by=by
        )
        await self._decided(
            record,
            ApprovalDecidedEvent(
                gate_correlation(journal, record),
                approval_id=approval_id,
                decision=decision,
                approver=approver,
                reason=reason,
                waited=gate_waited(journal, approval_id, record),
            ),
        )
        return record

    async def inputs(
        self,
        *,
        status: GateStatus | None = GateStatus.PENDING,
        agent: str | None = None,
        instance: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        tenant: str | None = None,
    ) -> ApprovalPage:
        """A page of the questions runs asked a person (``Turn.ask``), oldest first, from
        the store's gate index: by default those waiting for an answer; ``GateStatus.DECIDED``
        lists the answered ones, ``status=None`` every status; ``tenant``, only that
        tenant's (``None``: every one).

        Example::

            page = await runtime.inputs(agent="support")
            for gate in page.gates:
                print(gate.approval_id, gate.prompt, gate.answer_schema)
                await runtime.answer(gate.approval_id, "ann@example.com", responder="ann")
        """
        return await approval_page(
            require_capability(self._offered().gates, "gates"),
            kind=GateKind.INPUT,
            status=status,
            agent=agent,
            instance=instance,
            tool=None,
            limit=limit,
            cursor=cursor,
            tenant=tenant,
        )

    async def answer(
        self, input_id: str, value: JsonValue, *, responder: str, by: Actor | None = None
    ) -> Record:
        """Answer a parked question and requeue its submission, in one commit (``by``: who
        answered, as :meth:`approve` records who decided).

        Idempotent: the same answer again (concurrently too) returns the same record; a
        different one raises ``InputConflict``. A value that does not fit the request's
        schema raises ``InvalidAnswer`` and writes nothing; ``InputClosed`` once the input
        can no longer be answered (its submission settled without it).
        """
        journal = await gate_journal(
            self._check_open(), self._offered(), self.view, input_id, InputNotFound
        )
        record = await journal.answer(input_id, value, responder=responder, by=by)
        event = InputAnsweredEvent(
            gate_correlation(journal, record),
            input_id=input_id,
            responder=responder,
            waited=gate_waited(journal, input_id, record),
        )
        await self._decided(record, event)
        return record

    async def tenant_usage(
        self, tenant: str, *, period: Period = "day", at: datetime | None = None
    ) -> TenantUsage:
        """What ``tenant`` spent in the UTC ``period`` (``day`` or ``month``) that holds
        ``at`` (now, by the runtime's clock, if not given), as the store's usage aggregate
        says, with the budget it spends from then (``RuntimeConfig.tenant_budgets``), if
        any. ``StoreCapabilityMissing`` on a store without ``usage``.

        Example::

            usage = await runtime.tenant_usage("acme", period="month")
            print(usage.spent.cost_usd, usage.budget and usage.budget.cost_usd)
        """
        store = require_capability(self._offered().usage, "usage")
        start, end = period_bounds(period, at or self.clock.now())
        spent = await store.tenant_usage(tenant, start=start, end=end)
        budget = budget_of(self.config.tenant_budgets, tenant, period)
        return TenantUsage(tenant, period, start, end, spent, budget)

    async def session_usage(self, conversation_id: str) -> SessionSpend:
        """What the session of ``conversation_id`` spent, all its submissions together
        (model calls, tokens, cost, tool calls; its children's answers rolled up into it),
        counted from its journal as its session budget counts it, against that budget in
        force (extensions included; ``None``: it has none), and its open submission's
        spending against its own budget, if it has one. Reads the session's whole log;
        ``ConversationNotFound`` if there is no such conversation.

        Example::

            spend = await runtime.session_usage(conversation.id)
            if spend.budget is not None and spend.budget.model_calls is not None:
                print(spend.budget.model_calls - spend.spent.model_calls, "calls left")
        """
        conversation = await self._check_open().get_conversation(conversation_id)
        return await session_spend(self._started_context(), conversation)

    async def budget_gates(
        self,
        *,
        status: GateStatus | None = GateStatus.PENDING,
        agent: str | None = None,
        instance: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        tenant: str | None = None,
    ) -> ApprovalPage:
        """A page of the runs whose budget ran out under the ``park`` policy (``budget``
        gates), oldest first, from the store's gate index: by default those waiting for a
        decision. A gate's ``args`` hold the limit used up (``limit``, ``used``, ``max``),
        what was spent (``spent``) and the budget in force (``budget``).

        Example::

            for gate in (await runtime.budget_gates()).gates:
                print(gate.approval_id, gate.args["limit"], gate.args["used"])
        """
        return await approval_page(
            require_capability(self._offered().gates, "gates"),
            kind=GateKind.BUDGET,
            status=status,
            agent=agent,
            instance=instance,
            tool=None,
            limit=limit,
            cursor=cursor,
            tenant=tenant,
        )

    async def decide_budget(
        self,
        gate_id: str,
        decision: Literal["approve", "reject"],
        *,
        extension: Budget | Mapping[str, Any] | None = None,
        approver: str,
        reason: str | None = None,
        by: Actor | None = None,
    ) -> Record:
        """Decide a run parked on a ``budget`` gate (docs/budgets.md) and requeue it, in one
        commit: ``approve`` raises its budget by ``extension`` (each limit it sets is added
        to the one in force, on every later attempt); ``reject`` settles it
        ``budget_exhausted`` with its partial answer.

        Idempotent: the same decision again returns the same record; a different one raises
        ``ApprovalConflict``. ``ApprovalNotFound`` for an unknown gate id, ``InvalidApproval``
        once its submission settled, ``InvalidDispatch`` for a bad extension (or one on a
        rejection), nothing written.

        Example::

            [gate] = (await runtime.budget_gates()).gates
            await runtime.decide_budget(gate.approval_id, "approve",
                                        extension=Budget(model_calls=5), approver="ops")
        """
        grant = _extension(decision, extension)
        journal = await gate_journal(
            self._check_open(), self._offered(), self.view, gate_id, ApprovalNotFound
        )
        payload = BudgetDecided(
            gate_id=gate_id,
            decision=decision,
            extension=grant,
            reason=reason,
            approver=approver,
            by=by,
        )
        record = await journal.decide_budget(gate_id, payload)
        await self._decided(
            record,
            ApprovalDecidedEvent(
                gate_correlation(journal, record),
                approval_id=gate_id,
                decision=decision,
                approver=approver,
                reason=reason,
                waited=gate_waited(journal, gate_id, record),
                gate="budget",
            ),
        )
        return record

    async def _decided(self, record: Record, event: EngineEvent) -> None:
        if record.submission_id is not None:
            # Repeating a decision an earlier version wrote without its wake-up finishes it.
            with contextlib.suppress(SubmissionNotFound):
                submission = await self._check_open().get_submission(record.submission_id)
                await requeue_if_stranded(self._started_context(), submission)
        self._wake()
        await self.instrumentation.emit(event)

    async def fork(
        self,
        conversation_id: str,
        *,
        at_seq: int,
        session: str | None = None,
        by: Actor | None = None,
    ) -> Fork:
        """A new session whose log starts with this conversation's first ``at_seq`` records.

        A cut inside an execution is repaired as recovery would (``Fork.repaired``): a tool
        call separated from its result gets an ``unknown`` one, so the fork's next turn sees
        a whole history. ``by``, who asked for it as the server verified them
        (``tether.auth``), is recorded on the fork's ``conversation_created``.

        Example::

            fork = await runtime.fork(conversation_id, at_seq=12, session="retry",
                                      by=Actor(subject="ann@acme", tenant="acme"))
        """
        store = self._check_open()
        forks = require_capability(self._offered().forks, "forks")
        check_seq(at_seq, field="atSeq", least=1)
        parent = await store.get_conversation(conversation_id)
        name = session or f"fork-{new_ulid().lower()}"
        _check_name("session", name)
        key = SessionKey(parent.key.agent, parent.key.instance, name)
        child = await forks.fork(
            conversation_id,
            at_seq=at_seq,
            key=key,
            new_conversation_id=new_ulid(),
            created_at=self.clock.now(),
            by=by,
        )
        journal = await Journal.open(
            store,
            child.id,
            fence=NOT_MINTED,
            view=self.view(child.id),
            capabilities=self._offered(),
        )
        return Fork.of(child, tuple(await journal.repair_cut()))


def _check_tenant(conversation: Conversation, tenant: str | None) -> Conversation:
    """``conversation`` if ``tenant`` may touch it (``None``, an operator, touches any);
    ``ConversationNotFound`` otherwise: to another tenant, it does not exist."""
    if tenant is not None and conversation.tenant != tenant:
        raise ConversationNotFound(str(conversation.key))
    return conversation
