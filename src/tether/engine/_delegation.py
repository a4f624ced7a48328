"""Task calls as child submissions: the engine's side of ``Turn.delegate``.

One :class:`ChildDelegation` serves one attempt of a parent. A call it does not refuse
admits a child: a durable submission of the named agent in a session of its own, keyed on
the call (so a spawn re-driven after a crash finds the same child), carrying the parent's
submission id, call and depth. Its answer is read from the child's settlement once it has
settled; until then the parent parks (``children``) and holds no lease, and the store
requeues it in the commit that settles its last child.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import jsonschema
import orjson
from pydantic import Field, JsonValue, ValidationError

from tether._ids import new_ulid
from tether._wire import JsonObject, WireModel
from tether.engine._context import EngineContext
from tether.engine._inbound import Inbound
from tether.engine._observe import Correlation, Operation, RecoveryDecided, SubmissionSpawned
from tether.engine._settle import ABORTED, CANCELLED_BY_PARENT, failed
from tether.engine._usage import total_usage
from tether.errors import SubagentLimitReached, SubmissionNotFound
from tether.messages import Mediation, ToolCall, ToolOutcomeStatus, ToolResult, ToolSpec, Usage
from tether.records import (
    AssistantMessageCompleted,
    Record,
    SettlementStatus,
    SubmissionSettled,
    TaskFinished,
    TaskSpawned,
    ToolOutcome,
)
from tether.store import (
    NewSubmission,
    SessionKey,
    Submission,
    SubmissionStatus,
    TaskParent,
    require_capability,
)

__all__ = (
    "TASK_TOOL",
    "TASK_WAIT_EXCEEDED",
    "ChildDelegation",
    "TaskArgs",
    "abort_settlement",
    "cancel_children",
    "children_awaited",
    "partial_output",
    "task_session",
    "task_tool",
)

TASK_WAIT_EXCEEDED = "subagent_wait_exceeded"
"""The error code of a task whose child outran the parent's ``max_wait``."""


class TaskArgs(WireModel):
    """The arguments of a task call, as the model sends them."""

    agent: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    result_schema: JsonObject | None = None


TASK_TOOL = "task"
"""The name of the tool a delegating agent's model calls."""


def task_tool(offering: JsonValue) -> ToolSpec:
    """The task tool's spec for an execution's recorded offering (its ``subagents``
    config: the agents it may delegate to, each with its description): what the built-in
    agent shows its model. Built from the log, so a replay offers the same tool.

    Example::

        spec = task_tool([{"agent": "researcher", "description": "answers lookups"}])
    """
    agents = [
        (str(entry.get("agent", "")), str(entry.get("description") or ""))
        for entry in (offering if isinstance(offering, list) else [])
        if isinstance(entry, dict)
    ]
    roster = "\n".join(f"- {name}: {about}" if about else f"- {name}" for name, about in agents)
    return ToolSpec(
        name=TASK_TOOL,
        description=(
            "Delegate a self-contained task to a subagent, which works on it on its own and "
            "answers with its findings. Several task calls in one turn run in parallel. "
            f"The subagents:\n{roster}"
        ),
        parameters={
            "type": "object",
            "properties": {
                "agent": {
                    "type": "string",
                    "enum": [name for name, _ in agents],
                    "description": "Which subagent takes the task.",
                },
                "prompt": {
                    "type": "string",
                    "description": (
                        "The whole task: the subagent sees nothing else of this conversation."
                    ),
                },
                "result_schema": {
                    "type": "object",
                    "description": (
                        "A JSON Schema the answer must fit (optional): the answer is then JSON."
                    ),
                },
            },
            "required": ["agent", "prompt"],
            "additionalProperties": False,
        },
        mediation=Mediation.TASK,
    )


def task_session(parent_submission_id: str, idempotency_key: str) -> str:
    """The child's session (and dispatch id): derived from the call, so the same call always
    names the same child, and short enough for any session-name limit."""
    digest = hashlib.sha256(f"{parent_submission_id}\n{idempotency_key}".encode()).hexdigest()
    return f"task-{digest[:32]}"


class ChildDelegation:
    """The :class:`~tether.journal.Delegation` of one attempt of ``parent``, which may
    delegate to ``targets``."""

    def __init__(
        self, context: EngineContext, parent: Submission, targets: tuple[str, ...]
    ) -> None:
        self.context = context
        self.parent = parent
        self.targets = targets
        self._spawned: int | None = None
        self.wait_until: datetime | None = None
        """The earliest deadline of the children found still running (``max_wait``)."""
        self.waiting_for: list[str] = []
        """The children found still running, by submission id."""
        self.on_delivered: Callable[[TaskFinished], None] | None = None
        """Hears each child's answer once it is durable in the parent's log (a budget counts
        the child's usage against its parent's)."""
        self._given_up: set[str] = set()
        """Children whose wait lapsed: cancelled once the parent's log says so (their
        abort then reads as ``cancelled_by_parent``)."""

    # --- refusing ---------------------------------------------------------------------

    async def refuse(self, call: ToolCall) -> str | None:
        try:
            args = TaskArgs.model_validate(call.args)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "arguments"
            return f"task: {where}: {error['msg']}"
        if args.agent not in self.targets:
            known = ", ".join(self.targets)
            return f"task: cannot delegate to {args.agent!r}; the agents you may use are: {known}"
        if args.result_schema is not None:
            try:
                validator = jsonschema.validators.validator_for(args.result_schema)
                validator.check_schema(args.result_schema)
            except jsonschema.SchemaError as exc:
                return f"task: result_schema is not a valid JSON Schema: {exc.message}"
        limit = self.context.config.subagent_limits.max_children_per_run
        if self._spawned is None:
            children = require_capability(self.context.capabilities.children, "children")
            self._spawned = len(await children.list_children(self.parent.id))
        if self._spawned >= limit:
            return (
                f"task: the limit of {limit} subagent tasks for this run is reached; "
                "answer with what you have"
            )
        return None

    # --- spawning ---------------------------------------------------------------------

    async def spawn(self, call: ToolCall, intent: Record) -> TaskSpawned | str:
        """Admit the child, inside an ``execute_tool task`` operation: a tracing interceptor
        makes it the span the child's attempts join (when the parent's dispatch brought no
        trace of its own, the child's is this one). A tree at its ``max_total`` refuses it:
        the store counts in the admission's commit, the only place the count is exact."""
        operation = Operation("tool", TASK_TOOL, Correlation.of(self.parent), call.call_id)
        try:
            spawned: TaskSpawned = await self.context.instrumentation.intercept(
                operation, lambda: self._spawn(call, intent)
            )
        except SubagentLimitReached as full:
            return (
                f"task: the limit of {full.limit} subagent tasks for this whole task tree is "
                "reached; answer with what you have"
            )
        return spawned

    async def _spawn(self, call: ToolCall, intent: Record) -> TaskSpawned:
        args = TaskArgs.model_validate(call.args)
        parent = self.parent
        session = task_session(parent.id, call.idempotency_key)
        key = SessionKey(args.agent, parent.key.instance, session)
        inbound = Inbound(kind="user", body=args.prompt, result_schema=args.result_schema)
        new = NewSubmission(
            id=new_ulid(),
            key=key,
            conversation_id=new_ulid(),
            input=inbound.to_json_object(),
            created_at=self.context.clock.now(),
            dispatch_id=session,
            trace=parent.trace or self.context.instrumentation.trace_context(),
            parent=TaskParent(
                submission_id=parent.id,
                conversation_id=parent.conversation_id,
                seq=intent.seq,
                call_id=call.call_id,
                depth=parent.depth + 1,
                max_total=self.context.config.subagent_limits.max_total,
            ),
            tenant=parent.tenant,  # the store's rule too: a child is its parent's tenant's
            priority=parent.priority,  # a task is as urgent as the run that asked for it
            priority_aging=timedelta(seconds=self.context.config.priority_aging),
        )
        require_capability(self.context.capabilities.children, "children")  # it keeps parents
        admission = await self.context.store.admit(new)
        child = admission.submission
        if admission.created:
            self._spawned = (self._spawned or 0) + 1
            self.context.runs.wake_claims()
            await self.context.instrumentation.emit(
                SubmissionSpawned(
                    Correlation.of(child), parent_submission_id=parent.id, call_id=call.call_id
                )
            )
        return TaskSpawned(
            call_id=call.call_id,
            agent=args.agent,
            instance=key.instance,
            session=session,
            child_conversation_id=child.conversation_id,
            child_submission_id=child.id,
        )

    # --- answering --------------------------------------------------------------------

    async def answer(self, spawned: Record) -> tuple[TaskFinished, ToolResult] | None:
        task = spawned.payload
        assert isinstance(task, TaskSpawned)
        store = self.context.store
        child = await store.get_submission(task.child_submission_id)
        if child.status is not SubmissionStatus.SETTLED:
            max_wait = self.context.config.subagent_limits.max_wait
            now = self.context.clock.now()
            deadline = (
                datetime.fromisoformat(spawned.time) + timedelta(seconds=max_wait)
                if max_wait is not None
                else None
            )
            if deadline is None or now < deadline:
                self.waiting_for.append(child.id)
                if deadline is not None:
                    self.wait_until = min(deadline, self.wait_until or deadline)
                return None
            self._given_up.add(child.id)  # cancelled once this answer is durable
            error = f"the {task.agent} task did not finish within {max_wait:g} s; it was cancelled"
            lapsed = SubmissionSettled(
                status=SettlementStatus.FAILED, error=error, error_code=TASK_WAIT_EXCEEDED
            )
            return await self._finished(task, child, lapsed)
        return await self._finished(task, child, SubmissionSettled.model_validate(child.settlement))

    async def delivered(self, finished: Record) -> None:
        payload = finished.payload
        assert isinstance(payload, TaskFinished)
        if self.on_delivered is not None:
            self.on_delivered(payload)
        if payload.child_submission_id in self._given_up:
            self._given_up.discard(payload.child_submission_id)
            child_id = payload.child_submission_id
            await self.context.store.request_cancel(child_id, now=self.context.clock.now())
            self.context.runs.abort(child_id)
            self.context.runs.wake_claims()

    async def _finished(
        self, task: TaskSpawned, child: Submission, settled: SubmissionSettled
    ) -> tuple[TaskFinished, ToolResult]:
        """The answer of a child that ended as ``settled`` says: its result, or for a child
        that did not succeed, its error and the partial output it left."""
        view = await self.context.views.refreshed(self.context.store, child.conversation_id)
        usage = total_usage(view.records)
        succeeded = settled.status is SettlementStatus.SUCCEEDED
        finished = TaskFinished(
            call_id=task.call_id,
            child_conversation_id=task.child_conversation_id,
            child_submission_id=task.child_submission_id,
            status=settled.status,
            result=settled.result if succeeded else partial_output(view.records),
            error=None if succeeded else settled.error or f"it ended {settled.status}",
            error_code=settled.error_code,
            agent=task.agent,
            usage=Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
            ),
            model_calls=usage.calls,
            cost=usage.cost,
        )
        return finished, _tool_result(task, finished)


def partial_output(records: Sequence[Record]) -> str | None:
    """The last text the child's model produced, if any: what a failed child leaves."""
    for record in reversed(records):
        payload = record.payload if record.kind == AssistantMessageCompleted.KIND else None
        if isinstance(payload, AssistantMessageCompleted) and payload.message.text:
            return payload.message.text
    return None


def _tool_result(task: TaskSpawned, finished: TaskFinished) -> ToolResult:
    """The child's end as the parent's model reads it."""
    if finished.error is None:
        result = finished.result
        if isinstance(result, str):
            return ToolResult(call_id=task.call_id, content=result)
        return ToolResult(call_id=task.call_id, content=orjson.dumps(result).decode(), data=result)
    code = f" ({finished.error_code})" if finished.error_code else ""
    text = f"The {task.agent} task failed{code}: {finished.error}"
    if isinstance(finished.result, str) and finished.result:
        text += f"\nIts partial output:\n{finished.result}"
    return ToolResult(
        call_id=task.call_id, content=text, is_error=True, status=ToolOutcomeStatus.ERROR
    )


def children_awaited(effects: Sequence[Record]) -> tuple[str, ...]:
    """The children whose answers an execution's task calls still wait for."""
    answered = {r.payload.call_id for r in effects if isinstance(r.payload, ToolOutcome)}
    return tuple(
        r.payload.child_submission_id
        for r in effects
        if isinstance(r.payload, TaskSpawned) and r.payload.call_id not in answered
    )


async def cancel_children(context: EngineContext, parent: Submission) -> list[str]:
    """Cancel the unsettled children of a settled parent (each settles
    ``cancelled_by_parent``); returns their ids."""
    cancelled = []
    parents = context.capabilities.children
    for child in await parents.list_children(parent.id) if parents else ():
        if child.status is not SubmissionStatus.SETTLED:
            await context.store.request_cancel(child.id, now=context.clock.now())
            context.runs.abort(child.id)
            cancelled.append(child.id)
    if cancelled:
        context.runs.wake_claims()
        await context.instrumentation.emit(
            RecoveryDecided(
                Correlation.of(parent), decision="cancel_children", detail=", ".join(cancelled)
            )
        )
    return cancelled


async def abort_settlement(
    context: EngineContext, submission: Submission, reason: str
) -> SubmissionSettled:
    """An abort's settlement: ``cancelled_by_parent`` for a child its parent gave up on (the
    parent settled, or recorded this child's end: its wait lapsed), else ``aborted``, saying
    who asked for the cancel (``aborted_by``) when an authenticated request did."""
    parent_id = submission.parent_submission_id
    if parent_id is not None:
        with contextlib.suppress(SubmissionNotFound):
            parent = await context.store.get_submission(parent_id)
            if parent.status is SubmissionStatus.SETTLED:
                return failed(CANCELLED_BY_PARENT, f"its parent {parent.id} has settled")
            view = await context.views.refreshed(context.store, parent.conversation_id)
            if any(
                isinstance(record.payload, TaskFinished)
                and record.payload.child_submission_id == submission.id
                for record in view.records
                if record.kind == TaskFinished.KIND
            ):
                return failed(CANCELLED_BY_PARENT, f"its parent {parent.id} gave up on it")
    by = submission.cancel_requested_by
    if submission.cancel_requested_at is None:  # a copy from before the cancel: ask the store
        with contextlib.suppress(SubmissionNotFound):
            by = (await context.store.get_submission(submission.id)).cancel_requested_by
    return failed(ABORTED, reason).model_copy(update={"aborted_by": by})
