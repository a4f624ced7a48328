"""One attempt at one claimed submission: check the budgets, run, classify, settle.

Before any user code runs the attempt checks the abort flag, the registered agent, the
attempt budget and the deadline. It then runs the work under supervision (see
:mod:`._supervise`) and classifies how it ended: settled, parked, handed back or retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from pydantic import JsonValue

from tether._failpoints import ARMED
from tether.engine._agents import AgentDefinition, AgentSpec, build_spec
from tether.engine._budget import (
    BUDGET_EXHAUSTED,
    BUDGET_WAIT,
    BudgetedModel,
    BudgetedTools,
    BudgetExhausted,
    BudgetMeter,
    effective_budget,
)
from tether.engine._config import RuntimeConfig
from tether.engine._context import EngineContext
from tether.engine._delegation import (
    ChildDelegation,
    abort_settlement,
    cancel_children,
    children_awaited,
    partial_output,
)
from tether.engine._failpoints import FailpointModel, FailpointTools
from tether.engine._inbound import Inbound
from tether.engine._lease import Lease, LeaseGuardedModel, LeaseGuardedTools
from tether.engine._observe import (
    AttemptStarted,
    Correlation,
    DeltaReceived,
    ModelCallFailed,
    Operation,
    OperationEnded,
    OperationStarted,
    RecoveryDecided,
    SubmissionSettledEvent,
    SubmissionWaiting,
    ToolProgress,
    compaction_events,
)
from tether.engine._results import correction, judge
from tether.engine._resumption import resume_events
from tether.engine._runs import Stop
from tether.engine._settle import (
    ATTEMPT_BUDGET_EXHAUSTED,
    RUN_FAILED,
    TIMEOUT_EXCEEDED,
    complete,
    delivered_to,
    failed,
    settle,
    succeeded,
)
from tether.engine._steering import SteerWatch
from tether.engine._supervise import supervise
from tether.engine._tenant_budget import (
    TenantBudgetedModel,
    TenantBudgetedTools,
    UsageShare,
    tenant_budget_meter,
)
from tether.engine._versions import VERSION_DIVERGED
from tether.errors import (
    ApprovalParked,
    ChildrenPending,
    ClaimLost,
    Conflict,
    Fenced,
    IncompleteInvocation,
    InputParked,
    Parked,
    ProviderError,
    ReplayDiverged,
    StoreCapabilityMissing,
    StoreUnavailable,
    TetherError,
    TimerParked,
    TransientError,
)
from tether.journal import (
    EffectWrappers,
    Ending,
    Execution,
    ExecutionResult,
    Finisher,
    Journal,
    JournalHooks,
    Stamp,
    ToolExecutor,
    Versioning,
)
from tether.models import Model, ModelCallPolicy, StreamDelta
from tether.records import (
    BudgetRequested,
    Compaction,
    Record,
    RecordDraft,
    Signal,
    SteerReceived,
    SubmissionSettled,
    TaskFinished,
    UserMessage,
)
from tether.store import (
    WAIT_FOR_CHILDREN,
    WAIT_FOR_TIMER,
    ClaimSettlement,
    StoreCapabilities,
    Submission,
    SubmissionStatus,
    WaitStore,
    require_capability,
)

__all__ = ("run_attempt",)

_NOT_SPENT = frozenset(("limit", "used", "max", "scope", "tenant", "period"))
"""The details of an exhausted budget that are not what was spent."""

logger = logging.getLogger("tether.engine")


def is_transient(exc: BaseException) -> bool:
    """Worth another attempt: declared transient, a connection or timeout error, a store hiccup."""
    return isinstance(
        exc, TransientError | ConnectionError | TimeoutError | StoreUnavailable
    ) or bool(getattr(exc, "transient", False))


def _limits(definition: AgentDefinition | None, config: RuntimeConfig) -> tuple[int, float]:
    """The attempt budget and the timeout (seconds) of an agent's submissions: the agent's
    own, each the runtime's where it sets none (or is not registered)."""
    if definition is None:
        return config.max_attempts, config.submission_timeout
    return (
        definition.max_attempts or config.max_attempts,
        definition.timeout or config.submission_timeout,
    )


def _wait_reason(error: Parked, *, for_children: bool) -> str:
    """The store's name for what a parked submission waits for."""
    if for_children:
        return WAIT_FOR_CHILDREN
    if isinstance(error, TimerParked):
        return WAIT_FOR_TIMER
    return "input" if isinstance(error, InputParked) else "approval"


def _parked_on(error: Parked) -> str:
    """What a park waited for, as a recovery names it."""
    if isinstance(error, ApprovalParked):
        return f"approval {error.approval_id}"
    if isinstance(error, InputParked):
        return f"input {error.input_id}"
    if isinstance(error, TimerParked):
        return f"its timer ({error.timer_id})"
    return "its children"


def _timed_from(submission: Submission) -> datetime:
    """Where a submission's timeout counts from: its admission, or the time it last became
    due, a delayed dispatch's or the timer it last slept on (a sleep or a delay is not run
    time: a week's sleep must not time out an hour's budget)."""
    due = submission.wait_until
    if due is None or submission.wait_reason not in (None, WAIT_FOR_TIMER):
        return submission.created_at
    return max(submission.created_at, due)


def _deadline(error: Parked, delegation: ChildDelegation | None) -> datetime | None:
    """When a park's wait ends by itself: a timer's wake time, a wait for children's
    deadline (``None``: only what it waits for ends it)."""
    if isinstance(error, TimerParked):
        return error.wake_at
    return None if delegation is None else delegation.wait_until


@dataclass(frozen=True, slots=True)
class _Settling:
    """A settlement decided at an execution's end, whose records commit with that end."""

    settlement: SubmissionSettled
    absorbed: list[Submission]
    """The steers the run took in: they settle with it."""
    ending: Ending
    """What the journal appends with the end (and the claim it settles, if it does)."""

    @property
    def settles_claim(self) -> bool:
        """The end's commit settles the claim too (``append_settled``); otherwise the
        settlement was reserved first, and :func:`complete` finishes it."""
        return self.ending.settle is not None


class _Observer:
    """Feeds journal deltas and tool progress to engine observers."""

    def __init__(self, context: EngineContext, correlation: Correlation) -> None:
        self._events = context.instrumentation
        self._correlation = correlation
        self.on_commit = context.metrics.commit
        """How long each append's commit took, for the metrics."""

    async def on_record(self, records: Sequence[Record]) -> None:
        """Compactions, once durable (a queued one, or the agent's own on an overflow or past
        its threshold). Nothing else: live subscribers follow the store, and this process's
        waiters get the settlement from the attempt once it has finished."""
        for record in records:
            if record.kind == Compaction.KIND:
                for event in compaction_events(self._correlation, record):
                    await self._events.emit(event)

    async def on_progress(self, execution_id: str, call_id: str, text: str) -> None:
        await self._events.emit(ToolProgress(self._correlation, call_id=call_id, text=text))

    async def on_delta(self, execution_id: str, call_id: str, delta: StreamDelta) -> None:
        await self._events.emit(
            DeltaReceived(
                self._correlation, call_id=call_id, delta_kind=delta.kind, text=delta.text
            )
        )


def _parking(capabilities: StoreCapabilities, parked: Parked) -> WaitStore:
    """The store as what parks this wait: its children capability for children, its gates
    one for an approval or a question (``StoreCapabilityMissing`` naming it otherwise)."""
    if isinstance(parked, ChildrenPending):
        return require_capability(capabilities.children, "children")
    if isinstance(parked, TimerParked):  # woken by the engine, which asks for its due time
        require_capability(capabilities.timers, "timers")
        return require_capability(capabilities.waits, "timers")
    return require_capability(capabilities.gates, "gates")


async def run_attempt(context: EngineContext, submission: Submission, steering: SteerWatch) -> None:
    """Run a claimed submission to settlement, a park, or a release. Never raises.
    ``steering`` says when a check for steer messages must ask the store."""
    try:
        await _Attempt(context, submission, steering).run()
    except Exception:  # an attempt must never take the coordinator down
        fields = Correlation.of(submission).log_fields()
        logger.exception("attempt on %s crashed", submission.id, extra=fields)


class _Attempt:
    def __init__(
        self, context: EngineContext, submission: Submission, steering: SteerWatch
    ) -> None:
        self.context = context
        self.steering = steering
        self.store = context.store
        self.events = context.instrumentation
        self.submission = submission
        self.config = context.config
        self.version = context.versions.for_run(submission.key.agent, submission.version)
        """The version this run is on: its own, or the newest when the claim upgraded it."""
        self.definition: AgentDefinition | None = (
            None if self.version is None else self.version.definition
        )
        self.correlation = Correlation.of(submission)
        self.max_attempts, timeout = _limits(self.definition, self.config)
        self.deadline = _timed_from(submission) + timedelta(seconds=timeout)
        self.lease = Lease(context, submission)
        self.stop = Stop()
        """Why the run's supervisor (or an effect that found the claim lost) stopped it."""
        self._delivered: dict[str, str] = {}  # steer submission id -> the submission it joined
        self._committed: _Settling | None = None
        """The settlement whose record committed with the execution's end, once the work
        returns it: only the bookkeeping is left."""
        self.inbound = Inbound.model_validate(submission.input)
        self._journal_used: Journal | None = None
        """The journal the work opened: the head it last saw is what a park compares."""
        self.targets = context.subagents.targets(submission.key.agent, submission.depth)
        self.delegation = (
            ChildDelegation(context, submission, self.targets) if self.targets else None
        )
        """Runs the task calls of an agent that may delegate (its task tool is offered)."""
        budget = effective_budget(
            self.inbound.budget,
            None if self.definition is None else self.definition.budget,
            self.config.budget,
        )
        self.meter = None if budget is None else BudgetMeter(budget, context.clock.now)
        """What this submission has spent against its budget, if it has one."""
        session_budget = effective_budget(
            None if self.definition is None else self.definition.session_budget,
            self.config.session_budget,
        )
        self.session_meter = (
            None
            if session_budget is None
            else BudgetMeter(session_budget, context.clock.now, scope="session")
        )
        """What this submission's session has spent against its session budget, if any."""
        self.meters = [m for m in (self.meter, self.session_meter) if m is not None]
        self.tenant_budgets = context.tenant_budgets.of(submission.tenant)
        """The budgets of this submission's tenant per period (docs/budgets.md)."""
        self.tenant_meter = tenant_budget_meter(context.clock.now) if self.tenant_budgets else None
        """This submission's extensions of its tenant's budgets, read from its log."""
        self.usage_share = UsageShare() if self.tenant_meter is not None else None
        """Its calls on its worker's share of its tenant's budgets, given back as appended."""
        if self.meters and self.delegation is not None:
            self.delegation.on_delivered = self._child_delivered

    def _child_delivered(self, finished: TaskFinished) -> None:
        for meter in self.meters:
            meter.add_child(finished)

    async def settle(self, payload: SubmissionSettled, *, fresh_fence: bool = False) -> None:
        absorbed = await self._absorbed()
        done = await settle(
            self.store,
            self.submission,
            payload,
            clock=self.context.clock,
            fence=None if fresh_fence else self.submission.fence,
            absorbed=absorbed,
            view=self.context.views.get(self.submission.conversation_id),
        )
        if done:
            await self._settled(self.submission, payload)
            for steer in absorbed:
                await self._settled(steer, delivered_to(self.submission.id))

    async def _abort_reason(self) -> str:
        """What an abort found this submission doing when no run of it was under way: not
        started yet, parked (on a gate, or on its children), or queued again to go on."""
        sub = self.submission
        view = await self.context.views.refreshed(self.store, sub.conversation_id)
        mine = view.executions.by_submission.get(sub.id)
        if not mine:
            return "aborted before it started"
        if mine[-1].completed:
            return "aborted after its run ended, before it settled"
        gate = view.open_gate(sub.id)
        if gate is not None:
            if gate.decision is None:
                return f"aborted while waiting for {gate.kind}"
            if gate.kind == "input":
                return "aborted before its answer was taken"
            return "aborted before its approved tool call ran"
        if children_awaited(mine[-1].effects):
            return "aborted while waiting for its children"
        return "aborted before it went on"

    async def _absorbed(self) -> list[Submission]:
        """Queued steer submissions this run delivered: they settle with it."""
        mine = [sid for sid, host in self._delivered.items() if host == self.submission.id]
        found = [await self.store.get_submission(sid) for sid in mine]
        return [steer for steer in found if steer.status is SubmissionStatus.QUEUED]

    async def _complete(self, committed: _Settling) -> None:
        if not committed.settles_claim:
            await complete(
                self.store, self.submission, committed.absorbed, clock=self.context.clock
            )
        await self._settled(self.submission, committed.settlement)
        for steer in committed.absorbed:
            await self._settled(steer, delivered_to(self.submission.id))

    async def _settled(self, submission: Submission, payload: SubmissionSettled) -> None:
        correlation = Correlation.of(submission)
        settlement = payload.to_json_object()
        self.context.runs.notify_settled(submission.id, settlement)
        await self.events.emit(
            SubmissionSettledEvent(
                correlation,
                settlement=settlement,
                admitted_at=submission.created_at,
                settled_at=self.context.clock.now(),
            )
        )
        if submission.id == self.submission.id and self.delegation is not None:
            await cancel_children(self.context, submission)

    # --- the attempt ------------------------------------------------------------------

    async def run(self) -> None:
        sub = self.submission
        events = self.events
        await events.emit(
            AttemptStarted(
                self.correlation, attempt_count=sub.attempt_count, max_attempts=self.max_attempts
            )
        )
        # Everything here runs before any user code.
        if sub.cancel_requested_at is not None:
            reason = await self._abort_reason()
            return await self.settle(await abort_settlement(self.context, sub, reason))
        if self.definition is None:
            return await self.settle(
                failed(RUN_FAILED, f"agent {sub.key.agent!r} is not registered")
            )
        if sub.attempt_count > self.max_attempts:
            last = f"; last error: {sub.last_error}" if sub.last_error else ""
            message = self.context.redact(f"attempt budget of {self.max_attempts} exhausted{last}")
            return await self.settle(failed(ATTEMPT_BUDGET_EXHAUSTED, message))
        if self.context.clock.now() >= self.deadline:
            return await self.settle(
                failed(TIMEOUT_EXCEEDED, "the submission timed out before it ran")
            )

        stop = self.stop
        work = asyncio.create_task(self._work(), name=f"tether-attempt-{sub.id}")
        runs = self.context.runs
        runs.register(sub.id, work, stop)
        try:
            try:
                await supervise(
                    self.context, sub, work, stop, lease=self.lease, deadline=self.deadline
                )
            finally:
                runs.unregister(sub.id)
            await self._classify(work, stop)
        finally:
            # The journal refers back to this attempt (its steer source, its wrappers): a
            # cycle that would keep the journal's view, a whole conversation's records, alive
            # until the collector's next full pass, long after the view cache dropped it.
            self._journal_used = None
            if self.usage_share is not None and sub.tenant is not None:
                await self.context.tenant_budgets.forget(sub.tenant, self.usage_share)

    async def _classify(self, work: asyncio.Task[SubmissionSettled], stop: Stop) -> None:
        sub = self.submission
        events = self.events
        if stop.reason == "lease_lost":
            await events.emit(
                RecoveryDecided(self.correlation, decision="lease_lost", detail="abandoned")
            )
            if work.done() and not work.cancelled():
                work.exception()  # moot (e.g. Fenced), but retrieved: no "never retrieved" noise
            return  # another worker owns it now; our fence can no longer write
        if not work.done() or work.cancelled():
            if stop.reason == "shutdown":
                with contextlib.suppress(TetherError):
                    await self.store.release(
                        sub.id, attempt_id=str(sub.attempt_id), refund_attempt=True
                    )
                return
            if stop.reason == "timeout":
                return await self.settle(
                    failed(TIMEOUT_EXCEEDED, "the submission exceeded its timeout"),
                    fresh_fence=True,
                )
            return await self.settle(
                await abort_settlement(self.context, sub, "aborted"), fresh_fence=True
            )
        error = work.exception()
        if error is None and self._committed is not None:
            return await self._complete(self._committed)
        if error is None:
            return await self.settle(work.result())
        if isinstance(error, Parked):
            return await self._park(error)
        if isinstance(error, Fenced):
            # Superseded while still owning the claim (a peer finishing a stale settlement, an
            # operator's journal): the work is not at fault. Hand it back to resume from the
            # log under a new claim; the attempt still counts against the budget.
            detail = self.context.redact(f"{type(error).__name__}: {error}")
            await events.emit(
                RecoveryDecided(self.correlation, decision="superseded", detail=detail)
            )
            with contextlib.suppress(ClaimLost):
                await self.store.release(sub.id, attempt_id=str(sub.attempt_id), last_error=detail)
            return
        if isinstance(error, ReplayDiverged) and self._waits_for_a_fix():
            return await self._wait_for_a_fix(error)
        if isinstance(error, BudgetExhausted):
            if error.park and error.meter is not None:
                return await self._park_on_budget(error, error.meter)
            return await self._settle_exhausted(error)
        if isinstance(error, ProviderError):
            # The model call's own retries are spent (or cannot help): another attempt
            # would only multiply them.
            message = self.context.redact(str(error))
            return await self.settle(failed(error.code, message, error.details))
        if is_transient(error):
            delay = min(
                self.config.claim_interval * 2 ** max(sub.attempt_count - 1, 0),
                self.config.backoff_cap,
            )
            detail = self.context.redact(f"{type(error).__name__}: {error}")
            await events.emit(
                RecoveryDecided(self.correlation, decision="transient_backoff", detail=detail)
            )
            await self.context.clock.sleep(delay)
            with contextlib.suppress(ClaimLost):
                await self.store.release(sub.id, attempt_id=str(sub.attempt_id), last_error=detail)
            return
        message = self.context.redact(f"{type(error).__name__}: {error}")
        await self.settle(failed(RUN_FAILED, message))

    async def _settle_exhausted(self, error: BudgetExhausted) -> None:
        """Settle ``failed`` with ``budget_exhausted`` and the partial answer (the last text
        its model produced). The settlement closes what the execution left open, as an
        abort's does: a tool call without a result gets one, so the session's next run
        hands its model a history a provider accepts."""
        sub = self.submission
        view = await self.context.views.refreshed(self.store, sub.conversation_id)
        mine = view.executions.by_submission.get(sub.id)
        floor = mine[0].start_index if mine else len(view.records)
        payload = failed(BUDGET_EXHAUSTED, str(error), dict(error.details))
        partial = partial_output(view.records[floor:])
        if partial is not None:
            payload = payload.model_copy(update={"result": partial})
        await self.settle(payload)

    async def _park_on_budget(self, error: BudgetExhausted, meter: BudgetMeter) -> None:
        """Wait on a ``budget`` gate: append its request (unless the log holds one not yet
        decided, left by an attempt that crashed before it parked), then park without a
        lease, as a run parked on an approval does. A decision wakes it (requeued in the
        decision's commit); the next attempt reads the extension from the log."""
        sub = self.submission
        try:
            waits = require_capability(self.context.capabilities.gates, "gates")
        except StoreCapabilityMissing:  # no store to wait in: settle as the default does
            return await self._settle_exhausted(error)
        view = await self.context.views.refreshed(self.store, sub.conversation_id)
        head = view.head
        if meter.pending_gate is None:
            gate_id = f"{sub.conversation_id}.{head + 1}"
            details = error.details
            request = BudgetRequested(
                gate_id=gate_id,
                limit=str(details["limit"]),
                used=float(details["used"] or 0),
                max=float(details["max"] or 0),
                spent={
                    k: v
                    for k, v in details.items()
                    if k not in ("limit", "used", "max", "scope", "tenant", "period")
                },
                budget=(error.budget or meter.budget).to_json_object(),
                scope=None if meter.scope == "submission" else meter.scope,
            )
            draft = RecordDraft(request, submission_id=sub.id, attempt_id=sub.attempt_id)
            try:
                records = await self.store.append(
                    sub.conversation_id, [draft], expected_seq=head, fence=sub.fence
                )
            except (Conflict, Fenced) as moved:  # a steer, an abort, a newer writer: go again
                detail = self.context.redact(f"{type(moved).__name__}: {moved}")
                with contextlib.suppress(ClaimLost):
                    await self.store.release(
                        sub.id, attempt_id=str(sub.attempt_id), last_error=detail
                    )
                return
            head = records[-1].seq
        with contextlib.suppress(ClaimLost):
            parked = await waits.park(
                sub.id, attempt_id=str(sub.attempt_id), reason=BUDGET_WAIT, expected_seq=head
            )
            if parked.status is SubmissionStatus.QUEUED:
                detail = "budget gate: decided, settled or aborted before the park"
                await self.events.emit(
                    RecoveryDecided(self.correlation, decision="woken_before_park", detail=detail)
                )
                return
            await self.events.emit(SubmissionWaiting(self.correlation, reason=BUDGET_WAIT))

    def _waits_for_a_fix(self) -> bool:
        """A resume that diverged from its log under any policy (the code makes other effects
        than the log holds, or, under ``strict``, asks its model differently) does not end
        the run: it waits for code that can go on, where the store can park it."""
        return self.context.capabilities.waits is not None

    async def _wait_for_a_fix(self, error: ReplayDiverged) -> None:
        """Park the run, holding no lease and refunded, with ``version_diverged`` as its wait
        reason: a worker that starts wakes such waits of the agents it runs (a deploy with
        a patch, ``turn.patched``), and ``tether sessions upgrade`` moves them too."""
        sub = self.submission
        waits = self.context.capabilities.waits
        assert waits is not None  # _waits_for_a_fix said so
        detail = self.context.redact(str(error))
        await self.events.emit(
            RecoveryDecided(self.correlation, decision=VERSION_DIVERGED, detail=detail)
        )
        with contextlib.suppress(ClaimLost):
            parked = await waits.park(
                sub.id, attempt_id=str(sub.attempt_id), reason=VERSION_DIVERGED
            )
            if parked.status is SubmissionStatus.WAITING:
                await self.events.emit(SubmissionWaiting(self.correlation, reason=VERSION_DIVERGED))

    async def _park(self, error: Parked) -> None:
        """Wait without a lease. A CAS on the head this attempt saw (and, for children, on
        their being unsettled still): a decision, an abort or a child's end that came while
        it was still running requeues it instead, to be resumed as things are now."""
        sub = self.submission
        try:
            waits = _parking(self.context.capabilities, error)
        except StoreCapabilityMissing as missing:  # what parked needs the store to park it
            return await self.settle(failed(missing.code, str(missing)))
        seen = self._journal_used.head if self._journal_used is not None else None
        delegation = self.delegation
        children = isinstance(error, ChildrenPending) and delegation is not None
        with contextlib.suppress(ClaimLost):
            parked = await waits.park(
                sub.id,
                attempt_id=str(sub.attempt_id),
                reason=_wait_reason(error, for_children=children),
                expected_seq=seen,
                wait_until=_deadline(error, delegation if children else None),
            )
            if parked.status is SubmissionStatus.QUEUED:
                detail = f"{_parked_on(error)}: decided, settled or aborted before the park"
                await self.events.emit(
                    RecoveryDecided(self.correlation, decision="woken_before_park", detail=detail)
                )
                return
            if isinstance(error, TimerParked):
                self.context.runs.due(error.wake_at)  # the claim loop sleeps until then
            waited = tuple(delegation.waiting_for) if children and delegation else ()
            await self.events.emit(
                SubmissionWaiting(self.correlation, reason=str(parked.wait_reason), children=waited)
            )

    # --- the work (user code from here on) ----------------------------------------------

    async def _work(self) -> SubmissionSettled:
        assert self.definition is not None
        events = self.events
        key = self.submission.key
        spec = await build_spec(self.definition, key.agent, key.instance, self.config.env)
        operation = Operation("attempt", self.submission.key.agent, self.correlation)
        result: SubmissionSettled = await events.intercept(operation, lambda: self._drive(spec))
        return result

    def _model_calls(self, spec: AgentSpec) -> ModelCallPolicy:
        """The runtime's timeout and retry policy for model calls, as ``spec`` overrides them,
        telling the observers of each failed try (``ModelCallFailed``)."""
        policy = self.context.model_calls
        if spec.model_timeout is not None or spec.model_retry is not None:
            policy = replace(
                policy,
                timeout=policy.timeout if spec.model_timeout is None else spec.model_timeout,
                retry=spec.model_retry or policy.retry,
            )
        return policy.observed(self._model_call_failed)

    async def _model_call_failed(self, failure: ProviderError, retried: bool) -> None:
        await self.events.emit(
            ModelCallFailed(
                self.correlation, status=failure.status, code=failure.code, retried=retried
            )
        )

    async def _journal(self, spec: AgentSpec) -> Journal:
        sub = self.submission
        return await Journal.open(
            self.store,
            sub.conversation_id,
            fence=sub.fence,
            model=spec.model,
            tools=spec.tools,
            view=self.context.views.get(sub.conversation_id),
            refresh=True,
            lean=True,  # a cold view reads the tail: the first turn costs O(tail), not O(log)
            stamp=Stamp(sub.id, sub.attempt_id),
            capabilities=self.context.capabilities,
            hooks=JournalHooks(
                observer=_Observer(self.context, self.correlation),
                steer_source=self._steer_source,
                delegation=self.delegation,
                wrappers=self._wrappers(),
                redact=self.context.redact,
                model_calls=self._model_calls(spec),
                now=self.context.clock.now,
                clock=self.context.clock,
                **self._usage_hooks(),
            ),
        )

    def _usage_hooks(self) -> dict[str, Any]:
        """Under a tenant budget, its completions give back its worker's reservations."""
        share, gate = self.usage_share, self.context.tenant_budgets
        if share is None:
            return {}

        def appended(completions: int) -> None:
            gate.appended(share, completions)

        return {"usage_holder": gate.holder, "usage_appended": appended}

    def _wrappers(self) -> EffectWrappers:
        """Every model client and tool executor invoked: instrumented, and, under a budget,
        checked against it first (a call refused is never made, so never instrumented)."""
        events, correlation, meters = self.events, self.correlation, self.meters
        # Limits (docs/limits.md) outside the instrumentation: a wait for a rate limit is
        # no part of the call's latency; inside the budget: a call refused by the budget
        # waits for no limit. The tenant's budgets inside the submission's: a call its own
        # budget refuses reserves nothing of its tenant's.
        limits, submission = self.context.limits, self.submission
        tenant_budgets, tenant_meter = self.tenant_budgets, self.tenant_meter
        gate, tenant = self.context.tenant_budgets, submission.tenant
        share = self.usage_share
        # Failpoints (docs/testing.md) innermost, and only while some are armed.
        sleep = self.context.clock.sleep if ARMED else None

        lease, stop = self.lease, self.stop

        # The claim is confirmed after any wait for a limit, which may be long, and before
        # the instrumentation: a call the lost claim spares is never traced.
        def model(inner: Model) -> Model:
            if sleep is not None:
                inner = FailpointModel(inner, sleep)
            guarded = LeaseGuardedModel(events.model(inner, correlation), lease, stop)
            wrapped = limits.model(guarded, submission)
            if tenant_meter is not None and tenant is not None and share is not None:
                wrapped = TenantBudgetedModel(
                    wrapped, gate, tenant, share, tenant_budgets, tenant_meter
                )
            return BudgetedModel(wrapped, meters, now) if meters else wrapped

        def tools(inner: ToolExecutor) -> ToolExecutor:
            if sleep is not None:
                inner = FailpointTools(inner, sleep)
            wrapped: ToolExecutor = LeaseGuardedTools(events.tools(inner, correlation), lease, stop)
            if tenant_meter is not None and tenant is not None:
                wrapped = TenantBudgetedTools(wrapped, gate, tenant, tenant_budgets, tenant_meter)
            return BudgetedTools(wrapped, meters) if meters else wrapped

        now = self.context.clock.now
        return EffectWrappers(model=model, tools=tools)

    async def _count_spent(self, mine: Sequence[Execution]) -> None:
        """Take in what this submission's journaled records say it spent (earlier attempts,
        its children's answers), read from the store whole (a lean view may hold only the
        latest execution's records)."""
        if self.session_meter is not None:
            await self._count_session()
        tenant_meter = self.tenant_meter
        if tenant_meter is not None and mine:  # its extensions of its tenant's budgets
            await self._count_from(tenant_meter, mine[0].start.seq - 1)
        meter = self.meter
        if meter is None:
            return
        if not mine:  # nothing run yet: nothing spent (no log read), and its time starts now
            meter.started_at = self.context.clock.now()
            return
        sub = self.submission
        after = mine[0].start.seq - 1
        while True:
            page = await self.store.read(sub.conversation_id, after_seq=after, limit=1000)
            meter.count_records(page, sub.id)
            if len(page) < 1000:
                return
            after = page[-1].seq

    async def _count_from(self, meter: BudgetMeter, after: int) -> None:
        sub = self.submission
        while True:
            page = await self.store.read(sub.conversation_id, after_seq=after, limit=1000)
            meter.count_records(page, sub.id)
            if len(page) < 1000:
                return
            after = page[-1].seq

    async def _count_session(self) -> None:
        """Take in what the whole session has spent: every record of its conversation (a
        truncated head counts by its ``log_truncated``), read from the store page by page."""
        meter = self.session_meter
        assert meter is not None
        sub = self.submission
        after = 0
        while True:
            page = await self.store.read(sub.conversation_id, after_seq=after, limit=1000)
            meter.count_records(page, sub.id)
            if len(page) < 1000:
                return
            after = page[-1].seq

    async def _operation(
        self,
        name: str,
        journal: Journal,
        spec: AgentSpec,
        inputs: Sequence[UserMessage | Signal] | None,
        *,
        head: int | None = None,
    ) -> tuple[JsonValue, _Settling | None]:
        """Exec (``inputs`` given; at ``head`` if the view was just refreshed) or resume,
        ending the execution and, when the output settles the submission, settling it in the
        same commit: the output, and that settlement if it did."""
        events = self.events
        await events.emit(OperationStarted(self.correlation, operation=name))
        error: str | None = None
        decided: list[_Settling] = []

        async def finish(output: JsonValue) -> Ending:
            settling = await self._finish(journal, output)
            if settling is None:
                return Ending()
            decided.append(settling)
            return settling.ending

        try:
            result = await events.intercept(
                Operation("operation", name, self.correlation),
                lambda: self._execute(journal, spec, inputs, head, finish),
            )
            return result.output, decided[-1] if decided else None
        except BaseException as exc:
            error = self.context.redact(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            await events.emit(OperationEnded(self.correlation, operation=name, error=error))

    async def _execute(
        self,
        journal: Journal,
        spec: AgentSpec,
        inputs: Sequence[UserMessage | Signal] | None,
        head: int | None,
        finish: Finisher,
    ) -> ExecutionResult:
        """Resume the execution a crash left (``inputs`` is ``None``), or start one."""
        versioning = self._versioning(spec)
        if inputs is None:
            return await journal.resume(spec.harness, finish=finish, versioning=versioning)
        return await journal.exec(
            spec.harness,
            inputs,
            expected_seq=head,
            finish=finish,
            config=self._exec_config(),
            defer_start=True,  # under this claim's fresh fence
            versioning=versioning,
        )

    def _versioning(self, spec: AgentSpec) -> Versioning | None:
        """The version this run is on, what pins it, and what a resume does when the code
        asks its model differently than the log recorded: under ``strict`` it fails; under
        ``pinned`` and ``upgrade`` the recorded effects stand and the change is journaled."""
        if self.version is None:
            return None
        versions = self.context.versions
        policy = versions.policy(self.submission.key.agent)
        return Versioning(
            self.version.version,
            versions.pins_for(spec),
            "strict" if policy == "strict" else "upgrade",
        )

    def _exec_config(self) -> dict[str, JsonValue] | None:
        """Recorded on the execution, so that a harness (its replay too) asks its model for
        the right shape, and offers the task tool with the agents it may delegate to."""
        config: dict[str, JsonValue] = {}
        schema = self.inbound.result_schema
        if schema is not None:
            config["resultSchema"] = dict(schema)
        if self.targets:
            config["subagents"] = [
                {"agent": name, "description": self.context.agents[name].description or ""}
                for name in self.targets
            ]
        return config or None

    def _decide(self, output: JsonValue, journal: Journal) -> tuple[SubmissionSettled | None, str]:
        """The settlement this output earns, or ``None`` and the problem if a structured result
        does not conform yet and corrective turns are left (see :func:`judge`)."""
        retries = self.inbound.result_retries
        return judge(
            output,
            self.inbound.result_schema,
            corrections=len(journal.view.executions.by_submission.get(self.submission.id, [])) - 1,
            retries=retries if retries is not None else self.config.result_retries,
        )

    async def _finish(self, journal: Journal, output: JsonValue) -> _Settling | None:
        """The settlement an execution's output earns, with the records that append with its
        end: settling the claim in that very commit, or, when steers it absorbed settle with
        it, reserved first (two-phase, finished by :func:`complete`). ``None`` while a
        structured result still has corrections to go."""
        sub = self.submission
        settlement, _ = self._decide(output, journal)
        if settlement is None:
            return None
        absorbed = await self._absorbed()
        payload = settlement.to_json_object()
        joined = delivered_to(sub.id)
        records = [
            RecordDraft(settlement, submission_id=sub.id, attempt_id=sub.attempt_id),
            *(RecordDraft(joined, submission_id=steer.id) for steer in absorbed),
        ]
        if absorbed:
            await self.store.reserve_settlement(
                sub.id, attempt_id=str(sub.attempt_id), settlement=payload
            )
            return _Settling(settlement, absorbed, Ending(records))
        claim = ClaimSettlement(sub.id, str(sub.attempt_id), payload, self.context.clock.now())
        return _Settling(settlement, absorbed, Ending(records, settle=claim))

    async def _drive(self, spec: AgentSpec) -> SubmissionSettled:
        sub = self.submission
        journal = self._journal_used = await self._journal(spec)  # its view brought up to date
        view = journal.view
        # Steer submissions delivered in this conversation -> the submission each joined.
        self._delivered = dict(view.steer_sources)
        if self.inbound.kind in ("steer", "follow_up") and sub.id in self._delivered:
            return delivered_to(self._delivered[sub.id])  # it joined a settled run
        if self.inbound.kind == "compact":
            return await self._compact(journal, spec)
        mine = view.executions.by_submission.get(sub.id, [])
        await self._count_spent(mine)
        events = self.events
        first: Sequence[UserMessage | Signal] = [self.inbound.input_payload()]
        settling: _Settling | None = None
        if not mine:
            output, settling = await self._operation("exec", journal, spec, first, head=view.head)
        elif mine[-1].completed:
            detail = mine[-1].id
            await events.emit(
                RecoveryDecided(self.correlation, decision="completed_unsettled", detail=detail)
            )
            output = mine[-1].output  # type: ignore[assignment]
        else:
            for event in resume_events(self.correlation, mine[-1]):
                await events.emit(event)
            try:
                output, settling = await self._operation("resume", journal, spec, None)
            except IncompleteInvocation:  # only a cut inside the atomic start batch: start over
                output, settling = await self._operation("exec", journal, spec, first)
        while settling is None:
            settlement, problem = self._decide(output, journal)
            if settlement is not None:
                return settlement
            feedback = correction(problem, self.inbound.result_schema)
            corrective = [UserMessage(body=feedback)]
            output, settling = await self._operation("exec", journal, spec, corrective)
        self._committed = settling  # its records are durable: _classify does the bookkeeping
        return settling.settlement

    async def _compact(self, journal: Journal, spec: AgentSpec) -> SubmissionSettled:

        if spec.summarize is None:
            return failed(RUN_FAILED, f"agent {self.submission.key.agent!r} has no summarizer")
        view = await journal.refresh()
        messages = view.messages()
        users = [r.seq for r in view.records if r.kind == UserMessage.KIND]
        if not messages or not users:
            return succeeded({"compacted": False})
        summarize = spec.summarize
        summary = await self._model_calls(spec).call(lambda _touch: summarize(messages))
        compaction = Compaction(summary=summary, first_kept_seq=users[-1], reason="manual")
        sub = self.submission
        await journal.log.append(
            [RecordDraft(compaction, submission_id=sub.id, attempt_id=sub.attempt_id)]
        )
        return succeeded({"compacted": True, "firstKeptSeq": users[-1]})

    # --- steering -------------------------------------------------------------------

    async def _steer_source(self, modes: tuple[str, ...]) -> list[SteerReceived]:
        sub = self.submission
        if not self.steering.due():
            return []  # nothing was heard of steering since the last look
        queued = await self.store.list_submissions(
            SubmissionStatus.QUEUED, conversation_id=sub.conversation_id
        )
        steers: list[SteerReceived] = []
        for other in queued:
            inbound = Inbound.model_validate(other.input)
            if other.id in self._delivered or inbound.kind not in ("steer", "follow_up"):
                continue
            if inbound.kind in modes:
                self._delivered[other.id] = sub.id
                steers.append(inbound.steer_payload(other.id))
            else:
                self.steering.heard()  # for a later safe point (a follow-up after a steer)
        return steers
