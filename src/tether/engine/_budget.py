"""Per-submission budgets: limits on model calls, tokens, cost and tool calls, counted from
the journal and checked before each model call and each tool call (docs/budgets.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal, TypeVar

from tether._budget import Budget
from tether.errors import JournalError
from tether.journal import ToolExecutor, ToolScope
from tether.messages import Mediation, ModelRequest, ModelResponse, ToolCall, ToolResult, Usage
from tether.models import DeltaSink, Model, cost_of
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    BudgetDecided,
    BudgetRequested,
    ExecutionStarted,
    InputAnswered,
    InputRequested,
    LogTruncated,
    ModelCalled,
    Record,
    TaskFinished,
    ToolCalled,
)

__all__ = (
    "BUDGET_EXHAUSTED",
    "BUDGET_WAIT",
    "Budget",
    "BudgetExhausted",
    "BudgetMeter",
    "BudgetScope",
    "BudgetedModel",
    "BudgetedTools",
    "check_session_budget",
    "effective_budget",
)

BUDGET_EXHAUSTED: Final = "budget_exhausted"
_N = TypeVar("_N", int, float, timedelta)
BudgetScope = Literal["submission", "session", "tenant"]
BUDGET_WAIT: Final = "budget"
"""The wait reason of a run parked on a ``budget`` gate."""
_COUNTED_TOOLS: Final = frozenset((Mediation.HOST, Mediation.APPROVAL))
"""The tool calls a ``tool_calls`` limit counts: those the host's executor runs (one needing
approval counts from its request, approved or not). A person's answer to an ask is no
tool run, and a task call spends what its child spends."""


def check_session_budget(budget: Budget | None) -> None:
    """A session budget has no ``wall_time`` (a session may sit idle for weeks between two
    messages): ``ValueError`` if it sets one."""
    if budget is not None and budget.wall_time is not None:
        raise ValueError("a session budget has no wall_time: set it on each submission's")


def _first(value: _N | None, fallback: _N | None) -> _N | None:
    return fallback if value is None else value


def effective_budget(*budgets: Budget | None) -> Budget | None:
    """The budget of a submission from its sources, most specific first (the dispatch's,
    the agent's, the application's): each limit from the first that sets it."""
    result: Budget | None = None
    for budget in reversed(budgets):
        if budget is not None:
            result = budget.over(result)
    return None if result is None or result.unlimited else result


class BudgetExhausted(JournalError):
    """A submission's budget was used up before a model call or a tool call: it settles
    ``failed`` with ``budget_exhausted`` and its partial answer."""

    code = BUDGET_EXHAUSTED

    def __init__(
        self,
        message: str,
        details: dict[str, int | float | str | None],
        *,
        park: bool = False,
        meter: BudgetMeter | None = None,
        budget: Budget | None = None,
    ) -> None:
        super().__init__(message)
        self.details = details
        self.meter = meter
        """The meter that ran out (the submission's or its session's), or that keeps the
        extensions of its tenant's budget (scope ``tenant``)."""
        self.budget = budget if budget is not None or meter is None else meter.budget
        """The budget in force that ran out."""
        self.park = park
        """The budget's policy is ``park`` and no one rejected extending it: the run waits
        on a ``budget`` gate instead of settling."""


@dataclass(slots=True)
class BudgetMeter:
    """What one submission has spent: counted from its journaled records when its attempt
    starts, then from each call made live (the journal may hold a call's records back to
    commit them with the next, so the log alone can trail the calls just made)."""

    budget: Budget
    now: Callable[[], datetime]
    """The runtime's clock (``wall_time`` is measured on it)."""
    scope: BudgetScope = "submission"
    """What this meter counts: one submission's spending, or its whole session's (every
    submission of its conversation: a session budget)."""
    model_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    tool_calls: int = 0
    tool_ids: set[str] = field(default_factory=set)
    """The tool calls counted, so that one re-driven after a crash counts once."""
    child_ids: set[str] = field(default_factory=set)
    """The children whose answers were counted."""
    started_at: datetime | None = None
    """When the submission's first execution started (its ``execution_started`` record), or,
    before it has one, when this attempt began: ``wall_time`` counts from here."""
    waited: timedelta = timedelta(0)
    """The time it spent parked for a person (a gate's request to its decision), which
    ``wall_time`` does not count."""
    pending_gate: str | None = None
    """The budget gate this submission waits on, requested and not yet decided."""
    rejected: bool = False
    """A person rejected extending its budget: the next exhaustion settles, never parks."""
    _models: dict[str, str] = field(default_factory=dict)
    _asked: dict[str, datetime] = field(default_factory=dict)
    _gate_scopes: dict[str, BudgetScope] = field(default_factory=dict)

    def count_records(self, records: Sequence[Record], submission_id: str) -> None:
        """Take in a submission's journaled spending (its children's, by ``task_finished``).
        A model call counts once its completion is recorded: a replayed or resumed call
        that has one is served from the log, never bought again."""
        for record in records:
            mine = record.submission_id == submission_id
            if not mine and self.scope != "session":
                continue
            payload = record.payload
            if isinstance(payload, ExecutionStarted | ApprovalRequested | InputRequested):
                self._asking(payload, datetime.fromisoformat(record.time))
            elif isinstance(payload, ApprovalDecided | InputAnswered):
                self._answered(payload, datetime.fromisoformat(record.time))
            elif isinstance(payload, BudgetRequested):
                scope = payload.scope or "submission"
                self._gate_scopes[payload.gate_id] = scope
                if mine and scope == self.scope:
                    self.pending_gate = payload.gate_id
                self._asked.setdefault(payload.gate_id, datetime.fromisoformat(record.time))
            elif isinstance(payload, BudgetDecided):
                self.decided(payload, datetime.fromisoformat(record.time), mine=mine)
            elif isinstance(payload, ModelCalled):
                self._models[payload.call_id] = payload.model
            elif isinstance(payload, AssistantMessageCompleted) and not payload.interrupted:
                model = self._models.get(payload.call_id, "")
                at = datetime.fromisoformat(record.time)
                self.add_model_call(model, payload.usage, at=at, cost=payload.cost)
            elif isinstance(payload, ToolCalled) and payload.mediation in _COUNTED_TOOLS:
                if payload.call_id not in self.tool_ids:
                    self.tool_ids.add(payload.call_id)
                    self.tool_calls += 1
            elif isinstance(payload, TaskFinished):
                self.add_child(payload)
            elif isinstance(payload, LogTruncated) and payload.model_calls:
                self._add(payload.model_calls, payload.usage, payload.cost)

    def _asking(
        self, payload: ExecutionStarted | ApprovalRequested | InputRequested, at: datetime
    ) -> None:
        if isinstance(payload, ExecutionStarted):
            if self.started_at is None:
                self.started_at = at
        elif isinstance(payload, ApprovalRequested):
            self._asked.setdefault(payload.approval_id, at)
        else:
            self._asked.setdefault(payload.input_id, at)

    def decided(self, payload: BudgetDecided, at: datetime, *, mine: bool = True) -> None:
        """A person's decision on a budget gate of this meter's scope: an extension raises
        its limits (on every attempt from now on, each reading it from the log; a session's,
        for every later submission of the session too); a rejection makes this submission's
        next exhaustion settle."""
        self._answered(payload, at)
        if self._gate_scopes.get(payload.gate_id, "submission") != self.scope:
            return
        if payload.gate_id == self.pending_gate:
            self.pending_gate = None
        if payload.decision == "reject":
            self.rejected = self.rejected or mine
        elif payload.extension is not None:
            self.budget = self.budget.extended(Budget.model_validate(payload.extension))

    def _answered(
        self, payload: ApprovalDecided | InputAnswered | BudgetDecided, at: datetime
    ) -> None:
        if isinstance(payload, BudgetDecided):
            gate = payload.gate_id
        else:
            gate = payload.approval_id if isinstance(payload, ApprovalDecided) else payload.input_id
        asked = self._asked.pop(gate, None)
        if asked is not None and at > asked:
            self.waited += at - asked

    def elapsed(self) -> timedelta:
        """The wall time spent so far: since the start, less the waits for a person."""
        if self.started_at is None:
            self.started_at = self.now()
        return max(self.now() - self.started_at - self.waited, timedelta(0))

    def add_model_call(
        self, model: str, usage: Usage | None, *, at: datetime, cost: float | None = None
    ) -> None:
        """One model call; ``cost``, if its answer reported one, else priced from ``usage``."""
        if cost is None:
            cost = cost_of(model, usage or Usage(), at=at)
        self._add(1, usage, cost)

    def add_child(self, finished: TaskFinished) -> None:
        """A child's answer, counted once (its usage includes its own children's)."""
        if finished.child_submission_id in self.child_ids:
            return
        self.child_ids.add(finished.child_submission_id)
        calls = finished.model_calls or 0
        self._add(calls, finished.usage, finished.cost if calls else 0.0)

    def _add(self, calls: int, usage: Usage | None, cost: float | None) -> None:
        self.model_calls += calls
        if usage is not None:
            self.tokens += (usage.input_tokens or 0) + (usage.output_tokens or 0)
        if cost is None:
            self.cost_known = False
        else:
            self.cost_usd += cost

    def check(self, before: str) -> None:
        """Raise :class:`BudgetExhausted` if a limit is used up (``before`` names the call
        about to be made)."""
        budget = self.budget
        exhausted: tuple[str, float, float] | None = None
        if (
            budget.model_calls is not None
            and before == "model"
            and (self.model_calls >= budget.model_calls)
        ):
            exhausted = ("modelCalls", self.model_calls, budget.model_calls)
        elif budget.tokens is not None and before == "model" and self.tokens >= budget.tokens:
            exhausted = ("tokens", self.tokens, budget.tokens)
        elif (
            budget.cost_usd is not None
            and before == "model"
            and self.cost_known
            and self.cost_usd >= budget.cost_usd
        ):
            exhausted = ("costUsd", round(self.cost_usd, 6), budget.cost_usd)
        elif (
            budget.tool_calls is not None
            and before == "tool"
            and (self.tool_calls >= budget.tool_calls)
        ):
            exhausted = ("toolCalls", self.tool_calls, budget.tool_calls)
        if exhausted is None and budget.wall_time is not None:
            elapsed = self.elapsed()
            if elapsed >= budget.wall_time:
                limit_seconds = budget.wall_time.total_seconds()
                exhausted = ("wallTime", round(elapsed.total_seconds(), 3), limit_seconds)
        if exhausted is None:
            return
        name, used, limit = exhausted
        whose = "session budget" if self.scope == "session" else "budget"
        message = (
            f"{whose} exhausted: {name} used {used} of {limit} before a {before} call "
            f"({self.model_calls} model calls, {self.tokens} tokens, "
            f"{self._cost_text()}, {self.tool_calls} tool calls)"
        )
        details: dict[str, int | float | str | None] = {"scope": "session"}
        raise BudgetExhausted(
            message,
            {
                **(details if self.scope == "session" else {}),
                "limit": name,
                "used": used,
                "max": limit,
                "modelCalls": self.model_calls,
                "tokens": self.tokens,
                "costUsd": round(self.cost_usd, 6) if self.cost_known else None,
                "toolCalls": self.tool_calls,
                "wallTime": round(self.elapsed().total_seconds(), 3),
            },
            park=budget.on_exhausted == "park" and not self.rejected,
            meter=self,
        )

    def _cost_text(self) -> str:
        return f"${self.cost_usd:.6f}" if self.cost_known else "cost unknown"


class BudgetedModel:
    """A model client that checks the meters before each request and counts each answer
    on every one (a submission's, and its session's when it has a session budget)."""

    def __init__(
        self, inner: Model, meters: Sequence[BudgetMeter], now: Callable[[], datetime]
    ) -> None:
        self._inner = inner
        self._meters = meters
        self._now = now

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        for meter in self._meters:
            meter.check("model")
        response = await self._inner.request(request, stream)
        at = self._now()
        for meter in self._meters:
            meter.add_model_call(request.model, response.usage, at=at, cost=response.cost)
        return response


class BudgetedTools:
    """A tool executor that checks the meters before each new call and counts it on each (a
    call whose intent the log already holds, re-driven by a resume, was counted from it)."""

    def __init__(self, inner: ToolExecutor, meters: Sequence[BudgetMeter]) -> None:
        self._inner = inner
        self._meters = meters

    async def execute(self, call: ToolCall, scope: ToolScope) -> ToolResult:
        new = [meter for meter in self._meters if call.call_id not in meter.tool_ids]
        for meter in new:
            meter.check("tool")
        for meter in new:
            meter.tool_ids.add(call.call_id)
            meter.tool_calls += 1
        return await self._inner.execute(call, scope)
