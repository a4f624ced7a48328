"""The turn context: every effect a harness asks for goes through here and is journaled.

One class serves the three modes. *Live* appends an intent, performs the effect, and
appends its outcome. *Replay* serves every effect from the recorded stream and can
perform none (it has no model and no tool executor). *Resume* serves the recorded
prefix and goes live once it is exhausted, re-driving the effect a crash interrupted.
Effect calls are serialized by a lock around the journal (not around the model or the
tool itself), so concurrent calls are journaled in the order they were made.

A model call is written *behind*: its intent and its completion are held back and ride
with the turn's next append (the next tool intent, the execution's end, the first delta
batch of a stream). A model call has no side effect, so nothing is lost that matters if a
crash takes them (the model is asked again, exactly as for an intent with no completion),
while every effect that could act on the completion finds it durable before it starts.
That is one commit per model call instead of two. Anything that runs outside the journal
(a durable step's function, a compaction's view) flushes first.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, NoReturn, cast

from pydantic import JsonValue

from tether._canonical import canonical_json
from tether._ids import new_ulid
from tether._wire import JsonObject
from tether.errors import (
    ApprovalParked,
    ChildrenPending,
    DuplicateCallId,
    HostOwnedOutcome,
    InputParked,
    JournalError,
    MissingIdempotencyKey,
    MissingToolExecutor,
    RecordedModelFailure,
    ReplayDiverged,
    TetherError,
    TimerParked,
    TurnClosed,
    UnmediatedToolCall,
)
from tether.journal._check import PrefixEnd
from tether.journal._deltas import FLUSH_SECONDS, DeltaStream
from tether.journal._effects import NO_HOOKS, Delegation, JournalHooks, ToolExecutor, ToolScope
from tether.journal._history import messages_of
from tether.journal._inputs import answer_result, input_prompt
from tether.journal._log import JournalLog, logger
from tether.journal._notes import MISSING, last_note
from tether.journal._outcomes import (
    APPROVED_RUN,
    asked,
    effect_of,
    intent_of,
    outcome_of,
    result_of,
    step_value,
)
from tether.journal._recorded import Recorded
from tether.journal._tool_policy import (
    ATTEMPT_FAILED,
    AttemptTimeout,
    FailedAttempt,
    ToolFailure,
    ToolPolicy,
)
from tether.journal._versions import VersionGuard
from tether.messages import (
    Mediation,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolOutcomeStatus,
    ToolResult,
    args_digest,
)
from tether.models import Model, cost_of
from tether.records import (
    Actor,
    ApprovalDecided,
    ApprovalRequested,
    AssistantMessageCompleted,
    Compaction,
    InputAnswered,
    InputRequested,
    ModelCalled,
    PatchMarked,
    Payload,
    Record,
    RecordDraft,
    SteerReceived,
    StepRecorded,
    ToolCalled,
    ToolOutcome,
    VersionChanged,
)

__all__ = ("SLEEP_STARTED", "SLEEP_WOKE", "UNKNOWN_OUTCOME", "Mode", "Turn", "asked_by")

SLEEP_STARTED = "tether.sleep"
"""The name of the step a sleep starts with: ``{"timer": ..., "until": RFC 3339}``, durable
before the execution parks (``Turn.sleep``)."""
SLEEP_WOKE = "tether.woke"
"""The name of the step a sleep ends with, once its time has come: ``{"timer": ...}``."""

UNKNOWN_OUTCOME = (
    "The outcome of this tool call is unknown: the process running it stopped before its "
    "result was recorded. The tool is not declared idempotent, so it was not run again; "
    "it may or may not have taken effect."
)
_HOST_OWNED = frozenset({ToolOutcomeStatus.DENIED, ToolOutcomeStatus.UNKNOWN})
"""Outcomes only the host writes (a gate's rejection, a recovery's unknown): a harness's
report may not claim them."""


@dataclass(frozen=True, slots=True)
class Question:
    """What an input call asks a person: the prompt, and the schema the answer must fit."""

    prompt: str
    schema: JsonObject | None = None


class Mode(StrEnum):
    """How a turn serves effects: live, from the log alone (replay), or from the log and then
    live once the recorded ones run out (resume)."""

    LIVE = "live"
    REPLAY = "replay"
    RESUME = "resume"


def asked_by(inputs: Iterable[Payload]) -> Actor | None:
    """Who asked for an execution: the ``by`` of its first input that records one."""
    for payload in inputs:
        by = getattr(payload, "by", None)
        if by is not None:
            return cast(Actor, by)
    return None


class Turn:
    """What a harness gets: its history and inputs, and the journaled effect methods; and
    the turn's bookkeeping under them: its records held behind, its sticky failure, its
    recorded effects and the checks every effect call starts with."""

    def __init__(
        self,
        *,
        log: JournalLog,
        execution_id: str,
        session: str,
        mode: Mode,
        recorded: Recorded,
        history: list[Message] | Callable[[], list[Message]],
        inputs: list[Message],
        config: dict[str, JsonValue] | None,
        model: Model | None = None,
        tools: ToolExecutor | None = None,
        hooks: JournalHooks = NO_HOOKS,
        versions: VersionGuard | None = None,
        prefix: bool = False,
        identity: Actor | None = None,
    ) -> None:
        self.execution_id = execution_id
        self.identity = identity
        """Who asked for this execution, as the server verified them (the ``by`` of its
        first input that has one): a tool may act on their behalf. ``None`` when no one
        authenticated sent it (a library call, a schedule, a server without auth)."""
        self._history = history
        self.inputs = inputs
        self.config = config
        self.mode = mode
        self.model_invocations = 0
        self.tool_invocations = 0
        self._log = log
        self._session = session
        self._recorded = recorded
        self._model = model
        self._tools = tools
        self._hooks = hooks
        self._observer = hooks.observer
        self._steer_source = hooks.steer_source
        self._delegation = hooks.delegation
        self._pending_children: list[str] = []
        """Task calls of this turn whose child has not settled: it parks on them."""
        self._failure: TetherError | None = None
        self._closed = False
        self._call_ids: set[str] = set()
        self._asks = 0
        self._sleeps = 0
        self._behind: list[Payload] = []  # written with the next append
        self._returned: list[RecordDraft] = []
        """Drafts of an append cut short by a cancellation before the store answered: they
        go first in the next append (the failure record's), so that the log never shows an
        execution's failure without its start and inputs."""
        self._held_messages: dict[int, tuple[Message, ...]] = {}
        self._lock = asyncio.Lock()
        self._versions = versions
        self._prefix = prefix and mode is Mode.REPLAY
        """The recorded effects are a pending execution's prefix (the deploy gate's check):
        where a resume would go live, the turn stops with :class:`PrefixEnd`."""
        self._patches: dict[str, bool] = {}
        """Each patch id asked in this execution, and the answer it got (it keeps it)."""
        self._live_tool_steps: dict[str, list[Record]] = {}
        """The steps each call under a policy of retries took in its current attempt: the
        next attempt is served them."""
        self._offered: dict[str, JsonObject] = {}
        """The parameters schema of each tool the model was last offered, by tool name: an
        approval request records its tool's, for edits to be checked against."""

    @property
    def history(self) -> list[Message]:
        """The transcript as it stood when this execution started (the reduced active path).

        Built on first use: a harness that never reads it (one that keeps its own state)
        costs no transcription."""
        if callable(self._history):
            self._history = self._history()
        return self._history

    # --- bookkeeping ------------------------------------------------------------------

    @property
    def failure(self) -> TetherError | None:
        """The sticky failure (a divergence or a park), if one happened."""
        return self._failure

    def _check(self) -> None:
        if self._closed:
            raise TurnClosed(f"execution {self.execution_id} has ended; its turn is closed")
        if self._failure is not None:
            raise self._failure

    def _stick(self, error: TetherError) -> NoReturn:
        self._failure = error
        raise error

    def _diverge(
        self,
        message: str,
        *,
        at: Record | None = None,
        got: Payload | JsonObject | None = None,
        request: ModelRequest | None = None,
    ) -> NoReturn:
        """Fail the turn: the code asked for ``got`` where the log holds ``at``. A version
        change held behind is dropped: the new version did not get to run."""
        self._behind = [p for p in self._behind if not isinstance(p, VersionChanged)]
        versions = self._versions
        self._stick(
            ReplayDiverged(
                f"execution {self.execution_id}: {message}",
                execution_id=self.execution_id,
                seq=None if at is None else at.seq,
                expected=None if at is None else effect_of(at),
                got=asked(got),
                request=request,
                from_version=None if versions is None else versions.from_version,
                to_version=None if versions is None else versions.to_version,
                differs=() if versions is None else versions.differs,
            )
        )

    def announce_version_change(self, diverged_at: int | None = None) -> None:
        """Hold behind the ``version_changed`` record of a resume under ``upgrade`` (once
        per execution), so that it is durable before any new effect. A change announced
        without a seq (a harness that changed) takes the seq of the first recorded model
        call that differs, if one does before it is written."""
        versions = self._versions
        if versions is None:
            return
        if versions.announced and diverged_at is not None:
            for index, held in enumerate(self._behind):
                if isinstance(held, VersionChanged) and held.diverged_at is None:
                    self._behind[index] = held.model_copy(update={"diverged_at": diverged_at})
            return
        change = versions.announce(diverged_at)
        if change is not None:
            self._behind.append(change)

    def _input_changed(self, intent: Record) -> bool:
        """Whether a recorded model call whose input the code builds differently may be
        served all the same: the log says the code changed after it, or this resume
        upgrades (and journals the change, once)."""
        versions = self._versions
        if versions is None:
            return False
        if versions.covers(intent.seq):
            return True
        if not versions.upgrading or self.mode is Mode.REPLAY:
            return False
        self.announce_version_change(intent.seq)
        return True

    async def _append(self, payloads: Sequence[Payload]) -> list[Record]:
        """Append ``payloads`` after whatever is held behind; durable when this returns."""
        batch = self.take_behind()
        batch.extend(self._log.draft(p, self.execution_id) for p in payloads)
        if not batch:
            return []
        landed: list[Record] = []
        try:
            records = await self._log.append(batch, landed=landed)
        except TetherError as exc:
            # The log is no longer where this turn believes: nothing more may be written.
            self._failure = exc
            raise
        except asyncio.CancelledError:
            # Had the store committed them all the same, the failure record's append is
            # refused (its CAS) and the log stays as a crash would leave it: resumable.
            if not landed:
                self._returned[:0] = batch
            raise
        self.keep_messages(batch, records)
        return records

    def hold_behind(
        self, payloads: Sequence[Payload], messages: dict[int, tuple[Message, ...]]
    ) -> None:
        """Hold ``payloads`` to be written with the next append (records that need not be
        durable on their own: nothing was invoked on their account). ``messages`` (by ``id``
        of the payload) are what the harness was handed for them: their records keep them."""
        self._behind.extend(payloads)
        self._held_messages.update(messages)

    def keep_messages(self, drafts: Sequence[RecordDraft], records: Sequence[Record]) -> None:
        """Give the records of held inputs the messages the harness was handed for them, so
        that the history and the inputs are the same objects (see ``messages_of``)."""
        if not self._held_messages:
            return
        for draft, record in zip(drafts, records, strict=True):
            held = self._held_messages.pop(id(draft.payload), None)
            if held is not None:
                record._messages = held

    async def flush_behind(self) -> None:
        """Write what is held behind now, so that readers of the log see it."""
        async with self._lock:
            if self.held_count and self._failure is None and not self._closed:
                await self._append(())

    @property
    def held_count(self) -> int:
        """How many records the next append writes before its own (what it puts in front)."""
        return len(self._returned) + len(self._behind)

    def take_behind(self) -> list[RecordDraft]:
        """The records held behind, as drafts; the caller must append them (the journal puts
        them in front of the execution's end or failure record)."""
        behind, self._behind = self._behind, []
        drafts = [self._log.draft(p, self.execution_id) for p in behind]
        if self._returned:
            drafts[:0], self._returned = self._returned, []
        return drafts

    def _prefix_ends(self, where: str) -> None:
        """In the check of a pending execution, stop where a resume would go live (``where``
        says how): every recorded effect before it was made again."""
        if self._prefix:
            self._stick(PrefixEnd(f"execution {self.execution_id}: {where}"))

    def _live_allowed(
        self,
        what: str,
        got: Payload | JsonObject | None = None,
        request: ModelRequest | None = None,
    ) -> None:
        if self.mode is Mode.REPLAY:
            self._prefix_ends(f"the code asked for {what}, past the recorded effects")
            self._diverge(
                f"replay asked for {what} beyond the recorded effects", got=got, request=request
            )

    def next_recorded(self) -> Record | None:
        """The effect replay or resume will serve next (``None`` once the turn is live):
        lets a harness that mirrors an outside stream re-emit what was recorded."""
        return self._recorded.peek_intent()

    def close(self) -> None:
        """Seal the turn: every later effect call raises ``TurnClosed``."""
        self._closed = True

    def check_consumed(self) -> None:
        """Replay and resume must consume every recorded effect (else the harness diverged)."""
        if self._failure is not None:
            raise self._failure
        left = self._recorded.unconsumed()
        if left:
            kinds = ", ".join(f"{r.kind}@{r.seq}" for r in left[:5])
            total = len(self._recorded.records)
            self._diverge(
                f"consumed {total - len(left)} of {total} recorded effects; left: {kinds}",
                at=left[0],
                got={"kind": "execution_ended"},
            )

    # --- model ------------------------------------------------------------------------

    async def model(
        self,
        request: ModelRequest,
        *,
        purpose: Literal["summary"] | None = None,
        client: Model | None = None,
    ) -> ModelResponse:
        """Ask the model. Live: journal the intent, invoke, journal the whole completion.
        Replay: serve the recorded completion if the input hash matches (I0).

        ``purpose="summary"`` keeps the completion out of the transcript (a compaction summary
        is the harness's own business; the ``compaction`` record carries it). ``client``
        answers this call instead of the journal's model, and is invoked only if the call
        was never answered: a framework adapter passes the framework's own call."""
        async with self._lock:
            self._check()
            self.wait_for_children()  # the model cannot be asked before the children answer
            self._offered.update((spec.name, spec.parameters) for spec in request.tools)
            input_hash = request.input_hash()
            wanted: JsonObject = {
                "kind": ModelCalled.KIND,
                "payload": {"model": request.model, "inputHash": input_hash},
            }
            intent = self._recorded.peek_intent()
            if intent is not None:
                called = intent.payload
                if not isinstance(called, ModelCalled):
                    self._diverge(
                        f"seq {intent.seq} recorded {intent.kind}; the harness asked for the model",
                        at=intent,
                        got=wanted,
                        request=request,
                    )
                if called.input_hash != input_hash and not self._input_changed(intent):
                    self._diverge(
                        f"model input hash mismatch at seq {intent.seq} (I0): recorded "
                        f"{called.input_hash[:12]}, got {input_hash[:12]}",
                        at=intent,
                        got=wanted,
                        request=request,
                    )
                self._recorded.take_intent()
                completion = self._recorded.outcome("completion", called.call_id)
                if completion is not None:
                    payload = completion.payload
                    assert isinstance(payload, AssistantMessageCompleted)
                    return ModelResponse(
                        message=payload.message,
                        usage=payload.usage,
                        finish_reason=payload.finish_reason,
                        cost=payload.cost,
                    )
                if self._recorded.exhausted:
                    self._prefix_ends(f"the model call at seq {intent.seq} has no answer yet")
                if self.mode is Mode.REPLAY or not self._recorded.exhausted:
                    raise RecordedModelFailure(
                        f"the model call at seq {intent.seq} failed when it was recorded"
                    )
                call_id = called.call_id  # the crash point: invoke once, answering this intent
            else:
                self._live_allowed("a model call", wanted, request)
                call_id = new_ulid()
                self._behind.append(
                    ModelCalled(call_id=call_id, model=request.model, input_hash=input_hash)
                )
            model = self._model if client is None else self._hooks.model(client)
            if model is None:
                self._stick(JournalError("this journal has no model client"))
        # Under the hooks' timeout and retry policy if they have one; without, the call costs
        # what it did before there was a policy (no coroutine or closure more).
        policy = self._hooks.model_calls
        if policy is None:
            response, stream = await self._try(model, request, call_id, None)
        else:
            response, stream = await policy.call(
                lambda touch: self._try(model, request, call_id, touch)
            )
        self.model_invocations += 1
        async with self._lock:
            self._check()
            # Priced as it is answered, so that the store adds the cost up with the record
            # (a tenant's usage): zero or unknown is left out, as before there was a price.
            # A cost the answer reports (an agent CLI's) is what the call cost.
            cost = response.cost
            if cost is None and response.usage is not None:
                cost = cost_of(request.model, response.usage, at=self._hooks.now())
            completed = AssistantMessageCompleted(
                call_id=call_id,
                message=response.message,
                usage=response.usage,
                finish_reason=response.finish_reason,
                purpose=purpose,
                cost=cost or None,
            )
            self._behind.extend(stream.take())
            self._behind.append(completed)
        return response

    async def _try(
        self,
        model: Model,
        request: ModelRequest,
        call_id: str,
        touch: Callable[[], None] | None,
    ) -> tuple[ModelResponse, DeltaStream]:
        """One request. A try that fails leaves the intent durable and unanswered (a crash
        while waiting to retry asks again), its stream, if it began, closed by an interrupted
        completion; a retry streams anew under the same call id."""
        stream = DeltaStream(
            call_id, request.model, self.execution_id, self._observer, self._write_deltas, touch
        )
        try:
            return await self._answered(model.request(request, stream.on_delta)), stream
        except BaseException:
            await stream.close_interrupted()  # the intent stays, unanswered
            raise

    async def _write_deltas(self, payloads: Sequence[Payload], *, closing: bool) -> None:
        async with self._lock:
            if not closing:
                self._check()
            await self._append(payloads)

    async def _answered(self, answer: Coroutine[Any, Any, ModelResponse]) -> ModelResponse:
        """The model's answer. What is held behind (the call's intent, an execution's start)
        rides with the answer's commit; if the answer is slow to come, it is written first,
        after :data:`FLUSH_SECONDS`, so that readers of the log see the turn under way (a
        streaming model's deltas flush it sooner).

        The answer is awaited in this task, and only a slow one starts a task, to flush: a
        task and a wait for every call cost about 5% of a turn's instructions. A flush that
        fails leaves the turn failed (sticky), and its error is raised once the answer is in.
        """
        loop = asyncio.get_running_loop()
        flushing: list[asyncio.Task[None]] = []
        timer = loop.call_later(
            FLUSH_SECONDS, lambda: flushing.append(loop.create_task(self.flush_behind()))
        )
        try:
            return await answer
        finally:
            timer.cancel()
            if flushing:
                await flushing[0]  # written (or failed) before anything follows it

    # --- tools ------------------------------------------------------------------------

    async def tool(
        self,
        call: ToolCall,
        *,
        executor: ToolExecutor | None = None,
        policy: ToolPolicy | None = None,
    ) -> ToolResult:
        """Run a host-mediated tool at most once per idempotency key (I3).

        Live: the intent is durable before the tool runs, then the outcome. A tool that
        needs approval parks the execution (raises ``ApprovalParked``) until decided; a call
        of ``Mediation.INPUT`` asks a person for its result (see :meth:`ask`).
        ``executor`` runs this call instead of the journal's tool executor; ``policy``
        bounds each attempt and retries a failed one, journaling each failure (see
        :class:`~tether.journal.ToolPolicy`).
        """
        question = Question(input_prompt(call)) if call.mediation is Mediation.INPUT else None
        return await self._tool(call, executor, question, policy)

    async def ask(
        self,
        prompt: str,
        *,
        schema: JsonObject | None = None,
        tool: str = "ask",
        args: JsonObject | None = None,
        call_id: str | None = None,
    ) -> JsonValue:
        """Ask a person for a value and wait for the answer, durably: the execution parks
        (raises ``InputParked``) until ``Runtime.answer`` records one that fits ``schema``
        (a JSON Schema; none takes any JSON value), then the call returns it. Replay and
        recovery serve the recorded answer. ``tool`` and ``args`` say what asked (listed with
        the request); ``call_id`` defaults to ``ask-<n>``, the n-th ask of this turn.

        Example::

            email = await turn.ask("Which address should the invoice go to?",
                                   schema={"type": "string", "format": "email"})
        """
        self._asks += 1
        call_id = call_id or f"ask-{self._asks}"
        call = ToolCall(
            call_id=call_id,
            name=tool,
            args=args or {},
            idempotency_key=f"{self.execution_id}:{call_id}",
            mediation=Mediation.INPUT,
        )
        return (await self._tool(call, None, Question(prompt, schema), None)).data

    async def _tool(
        self,
        call: ToolCall,
        executor: ToolExecutor | None,
        question: Question | None,
        policy: ToolPolicy | None,
    ) -> ToolResult:
        tools = self._tools if executor is None else self._hooks.tools(executor)
        async with self._lock:
            self._check()
            if call.mediation is Mediation.REPORTED:
                raise UnmediatedToolCall(
                    f"{call.name}: a reported tool's result goes to turn.report"
                )
            if not call.idempotency_key:
                raise MissingIdempotencyKey(
                    f"tool call {call.call_id} ({call.name}) has no idempotency key"
                )
            intent = self._recorded.peek_intent()
            if intent is not None:
                self._match_tool(call, intent)
                self._recorded.take_intent()
                self._call_ids.add(call.call_id)
                plan = await self._recorded_tool(call, intent, tools, question)
            else:
                if tools is None and call.mediation is Mediation.HOST:
                    self._live_allowed(f"tool call {call.call_id}", intent_of(call))
                    raise MissingToolExecutor(f"no tool executor to run {call.name}")
                intent_payload = self._live_intent(call, "tool call")
                if call.mediation is Mediation.APPROVAL:
                    await self._request_approval(call, intent_payload)
                if question is not None:
                    await self._request_input(call, intent_payload, question)
                await self._append([intent_payload])
                plan = call
        if isinstance(plan, ToolResult):
            return plan
        assert tools is not None  # checked on the way in, live or recovering
        return await self._execute(plan, tools, policy)

    def _live_intent(self, call: ToolCall, what: str) -> ToolCalled:
        """The intent of a call the log does not hold: allowed live, and new to it."""
        intent = intent_of(call)
        self._live_allowed(f"{what} {call.call_id}", intent)
        if call.call_id in self._call_ids:
            raise DuplicateCallId(f"call id {call.call_id} was already used in this execution")
        self._call_ids.add(call.call_id)
        return intent

    def _match_tool(self, call: ToolCall, intent: Record) -> None:
        recorded = intent.payload
        if not isinstance(recorded, ToolCalled):
            self._diverge(
                f"seq {intent.seq} recorded {intent.kind}; the harness asked for tool {call.name}",
                at=intent,
                got=intent_of(call),
            )
        mismatch = [
            name
            for name, live, past in (
                ("call id", call.call_id, recorded.call_id),
                ("tool", call.name, recorded.tool),
                ("idempotency key", call.idempotency_key, recorded.idempotency_key),
                ("mediation", call.mediation, recorded.mediation),
            )
            if live != past
        ]
        if canonical_json(call.args) != canonical_json(recorded.args):
            mismatch.append("args")
        if mismatch:
            self._diverge(
                f"tool call at seq {intent.seq} differs in {', '.join(mismatch)}",
                at=intent,
                got=intent_of(call),
            )

    async def _recorded_tool(
        self, call: ToolCall, intent: Record, tools: ToolExecutor | None, question: Question | None
    ) -> ToolResult | ToolCall:
        """Serve a recorded call's outcome, or decide how to finish an interrupted one."""
        recorded = intent.payload
        assert isinstance(recorded, ToolCalled)
        outcome = self._recorded.outcome("outcome", call.call_id)
        request = self._recorded.outcome("request", call.call_id)
        decision = self._recorded.outcome("decision", call.call_id)
        if outcome is not None:
            self._recorded.consume_tool_steps(call.call_id)
            return result_of(outcome)
        if self.mode is Mode.REPLAY:
            self._prefix_ends(f"the tool call at seq {intent.seq} has no outcome yet")
            self._diverge(f"the tool call at seq {intent.seq} has no recorded outcome", at=intent)
        if question is not None:
            return await self._recorded_input(call, recorded, request, decision, question)
        if call.mediation is Mediation.APPROVAL:
            if request is None:  # the cut fell between the intent and its request: repair
                await self._request_approval(call, recorded, after_intent=True)
            assert request is not None
            if decision is None:
                requested = request.payload
                assert isinstance(requested, ApprovalRequested)
                self._stick(
                    ApprovalParked(
                        requested.approval_id, self.execution_id, call.call_id, request.seq
                    )
                )
            decided = decision.payload
            assert isinstance(decided, ApprovalDecided)
            if decided.decision == "reject":
                reason = f": {decided.reason}" if decided.reason else ""
                denied = ToolResult(
                    call_id=call.call_id,
                    content=f"Tool execution was denied by {decided.approver}{reason}.",
                    is_error=True,
                    status=ToolOutcomeStatus.DENIED,
                )
                await self._append([outcome_of(denied)])
                return denied
            if tools is None:
                self._stick(MissingToolExecutor(f"no tool executor to run approved {call.name}"))
            if not recorded.idempotent:
                # Approved, but not safe to run twice: the run is marked durable before it
                # starts, so a cut during it ends in an unknown outcome, as for any such call,
                # and a cut before it (the decision just recorded) still runs it.
                if self._recorded.tool_step(call.call_id, APPROVED_RUN) is not None:
                    return await self._unknown(call)
                await self._append(
                    [StepRecorded(call_id=call.call_id, name=APPROVED_RUN, value=decision.seq)]
                )
            args = (
                decided.args
                if decided.decision == "edit" and decided.args is not None
                else call.args
            )
            return call.model_copy(update={"args": args})
        if recorded.idempotent:
            if tools is None:
                self._stick(MissingToolExecutor(f"no tool executor to re-drive {call.name}"))
            return call  # safe to run again under the same key; its steps are served
        return await self._unknown(call)

    async def _unknown(self, call: ToolCall) -> ToolResult:
        """Close a call that may have run, and is not safe to run again, as unknown."""
        unknown = ToolResult(
            call_id=call.call_id,
            content=UNKNOWN_OUTCOME,
            is_error=True,
            status=ToolOutcomeStatus.UNKNOWN,
        )
        self._recorded.consume_tool_steps(call.call_id)  # the outcome stands for them
        await self._append([outcome_of(unknown)])
        return unknown

    async def _request_approval(
        self, call: ToolCall, intent: ToolCalled, *, after_intent: bool = False
    ) -> NoReturn:
        # The request's seq is known before the append (it is CAS-guarded), so the approval
        # id, conversation and seq, names the gate everywhere without another index.
        request_seq = self._log.head + self.held_count + (1 if after_intent else 2)
        approval_id = f"{self._log.conversation_id}.{request_seq}"
        request = ApprovalRequested(
            approval_id=approval_id,
            call_id=call.call_id,
            tool=call.name,
            args=call.args,
            args_digest=args_digest(call.args),
            parameters=self._offered.get(call.name),
            metadata=call.metadata,
        )
        await self._append([request] if after_intent else [intent, request])
        self._stick(ApprovalParked(approval_id, self.execution_id, call.call_id, request_seq))

    async def _recorded_input(
        self,
        call: ToolCall,
        recorded: ToolCalled,
        request: Record | None,
        answer: Record | None,
        question: Question,
    ) -> ToolResult:
        """An asked call the log holds: park while unanswered, else its answer is the result."""
        if request is None:  # a log cut between the two records of one commit: repair it
            await self._request_input(call, recorded, question, after_intent=True)
        assert request is not None
        if answer is None:
            requested = request.payload
            assert isinstance(requested, InputRequested)
            self._stick(
                InputParked(requested.input_id, self.execution_id, call.call_id, request.seq)
            )
        answered = answer.payload
        assert isinstance(answered, InputAnswered)
        result = answer_result(call.call_id, answered.value)
        await self._append([outcome_of(result)])
        return result

    async def _request_input(
        self, call: ToolCall, intent: ToolCalled, question: Question, *, after_intent: bool = False
    ) -> NoReturn:
        # As for an approval: the request's seq, known before its CAS-guarded append, names it.
        request_seq = self._log.head + self.held_count + (1 if after_intent else 2)
        input_id = f"{self._log.conversation_id}.{request_seq}"
        request = InputRequested(
            input_id=input_id,
            call_id=call.call_id,
            tool=call.name,
            args=call.args,
            prompt=question.prompt,
            answer_schema=question.schema,
            metadata=call.metadata,
        )
        await self._append([request] if after_intent else [intent, request])
        self._stick(InputParked(input_id, self.execution_id, call.call_id, request_seq))

    async def _execute(
        self, call: ToolCall, tools: ToolExecutor, policy: ToolPolicy | None
    ) -> ToolResult:
        scope = ToolScope(
            conversation_id=self._log.conversation_id,
            session=self._session,
            execution_id=self.execution_id,
            idempotency_key=call.idempotency_key,
            step=lambda name, fn: self._step(call.call_id, name, fn),
            progress=lambda text: self._progress(call.call_id, text),
            identity=self.identity,
            sleep=lambda when: self._tool_sleep(call.call_id, when),
        )
        # Attempts a recovered call already failed (a crash cut the wait or the next one):
        # it goes on with the attempts left, after the wait left.
        failed = self._recorded.failed_attempts(call.call_id)
        attempt = len(failed)
        retrying = policy is not None and policy.retries > 0
        if retrying:
            self._live_tool_steps[call.call_id] = []
        try:
            if failed:
                await self._wait_to_retry(failed[-1])
            while True:
                attempt += 1
                self.tool_invocations += 1
                answer = await self._attempt(call, tools, scope, policy)
                if isinstance(answer, ToolResult):
                    # Correlation is the host's: whatever id the executor returned, the
                    # call's wins.
                    result = answer.model_copy(update={"call_id": call.call_id})
                    break
                wait = (
                    None if policy is None else policy.delay(attempt, answer.cause, random.random())
                )
                if wait is None:
                    result = ToolResult(
                        call_id=call.call_id,
                        content=answer.message,
                        is_error=True,
                        status=ToolOutcomeStatus.ERROR,
                    )
                    break
                await self._attempt_failed(call.call_id, attempt, answer.message, wait)
        finally:
            self._live_tool_steps.pop(call.call_id, None)
        if result.is_error:
            # Masked before the harness sees it too: what it builds from the result (the next
            # model input, whose hash is recorded) must match what replay serves from the log.
            result = result.model_copy(update={"content": self._log.redact(result.content)})
        async with self._lock:
            self._check()
            self._recorded.consume_tool_steps(call.call_id)  # the outcome stands for them
            await self._append([outcome_of(result)])
        return result

    async def _attempt(
        self, call: ToolCall, tools: ToolExecutor, scope: ToolScope, policy: ToolPolicy | None
    ) -> ToolResult | FailedAttempt:
        """One attempt: its result, or what failed it."""
        timeout = None if policy is None else policy.timeout
        try:
            if timeout is None:
                return await tools.execute(call, scope)
            async with AttemptTimeout(timeout, self._hooks.clock) as limit:
                try:
                    return await tools.execute(call, scope)
                finally:
                    limit.stop()
        except JournalError:
            raise
        except TimeoutError as exc:
            if timeout is not None and limit.expired:
                return FailedAttempt(f"{call.name} timed out after {timeout:g} s", None)
            return FailedAttempt(f"{type(exc).__name__}: {exc}", exc)
        except ToolFailure as exc:
            return FailedAttempt(exc.message, exc)
        except Exception as exc:
            return FailedAttempt(f"{type(exc).__name__}: {exc}", exc)

    async def _attempt_failed(self, call_id: str, attempt: int, message: str, wait: float) -> None:
        """Journal a failed attempt that is tried again, then wait: a crash from here on
        resumes with the attempts left (a call declared idempotent; another's is unknown)."""
        retry_at = self._hooks.now() + timedelta(seconds=wait)
        failed = StepRecorded(
            call_id=call_id,
            name=ATTEMPT_FAILED,
            value={
                "attempt": attempt,
                "error": self._log.redact(message),
                "retryAt": retry_at.isoformat(),
            },
        )
        async with self._lock:
            self._check()
            await self._append([failed])
        # The next attempt is served the steps this one and those before it took.
        self._recorded.rewind_tool_steps(call_id, self._live_tool_steps.get(call_id, ()))
        self._live_tool_steps[call_id] = []
        await self._hooks.sleep(wait)

    async def _wait_to_retry(self, failed: Record) -> None:
        value = step_value(failed)
        retry_at = value.get("retryAt") if isinstance(value, dict) else None
        if isinstance(retry_at, str):
            left = (datetime.fromisoformat(retry_at) - self._hooks.now()).total_seconds()
            if left > 0:
                await self._hooks.sleep(left)

    async def _progress(self, call_id: str, text: str) -> None:
        """Partial tool output for observers: ephemeral, never journaled, not replayed."""
        on_progress = getattr(self._observer, "on_progress", None)
        if on_progress is not None:
            try:
                await on_progress(self.execution_id, call_id, text)
            except Exception:
                logger.exception("journal observer failed on_progress")

    async def report(self, result: ToolResult) -> ToolResult:
        """Record the result of a tool the harness ran itself (no intent is journaled).

        Returns the result as journaled: on replay and resume, the recorded one (matched by
        call id; the content passed is not compared)."""
        async with self._lock:
            self._check()
            intent = self._recorded.peek_intent()
            if intent is not None:
                recorded = intent.payload
                if not isinstance(recorded, ToolOutcome) or recorded.call_id != result.call_id:
                    got = f"a report for {result.call_id}"
                    self._diverge(
                        f"seq {intent.seq} recorded {intent.kind}; got {got}",
                        at=intent,
                        got=outcome_of(result),
                    )
                return result_of(self._recorded.take_intent())
            self._live_allowed(f"a report for {result.call_id}", outcome_of(result))
            if result.status in _HOST_OWNED:
                raise HostOwnedOutcome(
                    f"a report for {result.call_id} may not claim status {result.status.value!r}: "
                    "only the host writes it (a rejected approval, an unknown outcome)"
                )
            await self._append([outcome_of(result)])
            return result

    # --- task calls -------------------------------------------------------------------

    async def delegate(self, call: ToolCall) -> ToolResult | None:
        """Run a task call (``Mediation.TASK``) as a child submission, at most once per call.

        Live: the intent is durable, then the host's delegation admits the child (or refuses
        the call: an error result at once), then ``task_spawned`` is appended. Returns the
        child's answer once it is in the log (a replay serves it from there; a resume that
        finds the child settled records it, with ``task_finished``), or ``None`` while the
        child runs: the harness then ends its tool batch with :meth:`wait_for_children`.

        Example::

            results = [await turn.delegate(call) for call in task_calls]
            turn.wait_for_children()  # parks the execution if a child is still running
        """
        async with self._lock:
            self._check()
            if call.mediation is not Mediation.TASK:
                raise UnmediatedToolCall(f"{call.name}: only a task call is delegated")
            if not call.idempotency_key:
                raise MissingIdempotencyKey(f"task call {call.call_id} has no idempotency key")
            spawned: Record | None = None
            intent = self._recorded.peek_intent()
            if intent is not None:
                self._match_tool(call, intent)
                self._recorded.take_intent()
                self._call_ids.add(call.call_id)
                outcome = self._recorded.outcome("outcome", call.call_id)
                spawned = self._recorded.outcome("spawned", call.call_id)
                self._recorded.outcome("finished", call.call_id)
                if outcome is not None:
                    return result_of(outcome)
                if self.mode is Mode.REPLAY:
                    self._prefix_ends(f"the task call at seq {intent.seq} has no answer yet")
                    self._diverge(
                        f"the task call at seq {intent.seq} has no recorded answer", at=intent
                    )
                delegation = self._delegation_for(call)
            else:
                called = self._live_intent(call, "task call")
                delegation = self._delegation_for(call)
                refusal = await delegation.refuse(call)
                if refusal is not None:
                    refused = _refused(call, refusal)
                    await self._append([called, outcome_of(refused)])
                    return refused
                intent = (await self._append([called]))[-1]
            if spawned is None:
                admitted = await delegation.spawn(call, intent)
                if isinstance(admitted, str):  # refused at admission: answered at once
                    refused = _refused(call, admitted)
                    await self._append([outcome_of(refused)])
                    return refused
                spawned = (await self._append([admitted]))[-1]
            answer = await delegation.answer(spawned)
            if answer is None:
                self._pending_children.append(call.call_id)
                return None
            finished, result = answer
            result = result.model_copy(update={"call_id": call.call_id})
            *_, record = await self._append([outcome_of(result), finished])
            await delegation.delivered(record)
            return result

    def _delegation_for(self, call: ToolCall) -> Delegation:
        if self._delegation is None:
            self._stick(MissingToolExecutor(f"no delegation to run task call {call.call_id}"))
        return self._delegation

    def wait_for_children(self) -> None:
        """Park the execution (raise ``ChildrenPending``) if a task call of this turn still
        waits for its child; return at once otherwise. A model call, or the execution's
        end, while one waits parks it just the same."""
        if self._pending_children:
            self._stick(ChildrenPending(self.execution_id, tuple(self._pending_children)))

    # --- patches ----------------------------------------------------------------------

    def patched(self, patch_id: str) -> bool:
        """Whether this execution takes the new branch of a code change (Temporal's
        ``patched``, DBOS's ``patch``): ``True`` once the turn is live (the answer is
        journaled, as a ``patch_marked`` record, with the turn's next write) and in a resume
        or replay of an execution that took it; ``False`` in a resume or replay of one that
        passed this point before the patch existed (its next recorded effect is another),
        so it keeps doing what it did. The same id answers the same all execution long.

        Remove the old branch once no execution that could take it is left to resume or
        replay; keep the ``patched`` call until then (a recorded mark must be consumed).

        Example::

            if turn.patched("confirm-before-send"):
                await turn.tool(confirm_call)  # new code: ask first
            result = await turn.tool(send_call)
        """
        self._check()
        known = self._patches.get(patch_id)
        if known is not None:
            return known
        intent = self._recorded.peek_intent()
        if intent is not None:
            payload = intent.payload
            marked = isinstance(payload, PatchMarked) and payload.patch_id == patch_id
            if marked:
                self._recorded.take_intent()
        elif self.mode is Mode.REPLAY:
            self._prefix_ends(f"patch {patch_id} is asked past the recorded effects")
            marked = False  # the execution ended without passing a mark
        else:
            self._behind.append(PatchMarked(patch_id=patch_id))
            marked = True
        self._patches[patch_id] = marked
        return marked

    # --- timers -----------------------------------------------------------------------

    async def sleep(self, duration: timedelta | float) -> None:
        """Sleep durably for ``duration`` (a ``timedelta``, or seconds): the wake time is
        journaled, and the execution parks (raises ``TimerParked``) holding no lease and no
        process; the engine requeues it at that time, after a crash or a restart too, and the
        call returns. A recovery or a replay of a sleep that has ended returns at once.

        Example::

            await turn.sleep(timedelta(days=7))
        """
        span = duration if isinstance(duration, timedelta) else timedelta(seconds=duration)
        if span < timedelta(0):
            raise ValueError(f"a sleep cannot be negative: {span}")
        await self._sleep(lambda now: now + span)

    async def sleep_until(self, when: datetime) -> None:
        """Sleep durably until ``when`` (timezone-aware): as :meth:`sleep`. A time already
        past still journals the sleep, and returns at once.

        Example::

            await turn.sleep_until(datetime(2027, 1, 1, 9, tzinfo=UTC))
        """
        if when.tzinfo is None:
            raise ValueError("sleep_until needs a timezone-aware datetime")
        await self._sleep(lambda _now: when.astimezone(UTC))

    async def _sleep(self, until: Callable[[datetime], datetime]) -> None:
        self._sleeps += 1
        timer = f"sleep-{self._sleeps}"
        async with self._lock:
            self._check()
            got: JsonObject = {"kind": StepRecorded.KIND, "payload": {"name": SLEEP_STARTED}}
            intent = self._recorded.peek_intent()
            if intent is not None:
                wake_at = self._recorded_sleep(intent, timer, got)
                self._recorded.take_intent()
                woke = self._recorded.peek_intent()
                if woke is not None and _is_sleep(woke, SLEEP_WOKE, timer):
                    self._recorded.take_intent()
                    return  # it ended: served at once, with no wait
                if self.mode is Mode.REPLAY:
                    self._prefix_ends(f"the sleep at seq {intent.seq} has not ended")
                    self._diverge(f"the sleep at seq {intent.seq} has not ended", at=intent)
            else:
                self._live_allowed(f"sleep {timer}", got)
                wake_at = until(self._hooks.now()).astimezone(UTC)
                started = StepRecorded(
                    call_id="",
                    name=SLEEP_STARTED,
                    value={"timer": timer, "until": wake_at.isoformat()},
                )
                await self._append([started])  # durable before the park names its time
            if self._hooks.now() < wake_at:
                self._stick(TimerParked(timer, self.execution_id, wake_at))
            # Its time has come: the end rides with the next write (a cut before it only
            # makes the next recovery find the time past again, and end it then).
            self._behind.append(StepRecorded(call_id="", name=SLEEP_WOKE, value={"timer": timer}))

    async def _tool_sleep(self, call_id: str, when: datetime | timedelta) -> None:
        """A sleep inside tool call ``call_id``: a step of the call (served on its re-run)."""
        if isinstance(when, datetime) and when.tzinfo is None:
            raise ValueError("a sleep needs a timezone-aware datetime")
        async with self._lock:
            self._check()
            recorded = self._recorded.tool_step(call_id, SLEEP_STARTED)
            if recorded is None:
                start = self._hooks.now()
                wake_at = (start + when if isinstance(when, timedelta) else when).astimezone(UTC)
                value: JsonObject = {"timer": call_id, "until": wake_at.isoformat()}
                await self._append([StepRecorded(call_id=call_id, name=SLEEP_STARTED, value=value)])
            else:
                payload = recorded.payload
                assert isinstance(payload, StepRecorded) and isinstance(payload.value, dict)
                wake_at = datetime.fromisoformat(str(payload.value["until"]))
            if self._hooks.now() < wake_at:
                self._stick(TimerParked(call_id, self.execution_id, wake_at))

    def _recorded_sleep(self, intent: Record, timer: str, got: JsonObject) -> datetime:
        """The wake time of the recorded sleep ``intent``, which must be this one."""
        if not _is_sleep(intent, SLEEP_STARTED, timer):
            self._diverge(
                f"seq {intent.seq} recorded {intent.kind}; the harness slept ({timer})",
                at=intent,
                got=got,
            )
        payload = intent.payload
        assert isinstance(payload, StepRecorded) and isinstance(payload.value, dict)
        return datetime.fromisoformat(str(payload.value["until"]))

    # --- steps and steering -----------------------------------------------------------

    async def note(self, name: str, value: JsonValue) -> JsonValue:
        """Keep ``value`` in the log for the next execution (:meth:`last_note` reads it).

        A note is a value the harness computed itself: nothing outside the journal acts on
        it, so it takes no commit of its own but rides with the turn's next write (normally
        the execution's end). Note last: an execution's note is its last effect. Replay and
        resume serve the recorded value, and a different one diverges (the code around the
        journaled calls computed something else from the same answers).

        Example::

            await turn.note("myharness.state", {"count": count})
        """
        async with self._lock:
            self._check()
            got: JsonObject = {"kind": StepRecorded.KIND, "payload": {"name": name, "value": value}}
            intent = self._recorded.peek_intent()
            if intent is not None:
                payload = intent.payload
                if not isinstance(payload, StepRecorded) or payload.name != name:
                    self._diverge(
                        f"seq {intent.seq} recorded {intent.kind}; the harness noted {name}",
                        at=intent,
                        got=got,
                    )
                if canonical_json(payload.value) != canonical_json(value):
                    self._diverge(f"note {name} differs from the recorded one", at=intent, got=got)
                self._recorded.take_intent()
                return payload.value
            self._live_allowed(f"note {name}", got)
            payload = StepRecorded(call_id="", name=name, value=value)
            self._behind.append(payload)
            return payload.value

    async def last_note(self, name: str) -> JsonValue | None:
        """What the latest earlier execution noted under ``name`` (:meth:`note`), or ``None``.

        Executions are asked latest first: one that completed answers (``None`` if it noted
        nothing under the name); one that never completed (parked and abandoned, or cut by a
        fork) only if its note reached the log, else the one before it. A fork's copied
        executions count as the log's own.

        Example::

            state = await turn.last_note("myharness.state") or {"count": 0}
        """
        found = await last_note(self._log, self.execution_id, name)
        return None if found is MISSING else cast(JsonValue, found)

    async def step(self, name: str, fn: Callable[[], Awaitable[JsonValue]]) -> JsonValue:
        """Run ``fn`` once and journal its JSON value; recovery and replay serve the value."""
        return await self._step("", name, fn)

    async def _step(
        self, call_id: str, name: str, fn: Callable[[], Awaitable[JsonValue]]
    ) -> JsonValue:
        async with self._lock:
            self._check()
            if call_id:
                recorded = self._recorded.tool_step(call_id, name)
                if recorded is not None:
                    return step_value(recorded)
            else:
                intent = self._recorded.peek_intent()
                if intent is not None:
                    payload = intent.payload
                    if not isinstance(payload, StepRecorded) or payload.name != name:
                        self._diverge(
                            f"seq {intent.seq} recorded {intent.kind}; the harness ran step {name}",
                            at=intent,
                            got={"kind": StepRecorded.KIND, "payload": {"name": name}},
                        )
                    self._recorded.take_intent()
                    return payload.value
            self._live_allowed(
                f"step {name}", {"kind": StepRecorded.KIND, "payload": {"name": name}}
            )
            await self._append(())  # fn acts outside the journal: what it follows is durable
        value = await fn()
        payload = StepRecorded(call_id=call_id, name=name, value=value)
        async with self._lock:
            self._check()
            records = await self._append([payload])
        attempt_steps = self._live_tool_steps.get(call_id)
        if attempt_steps is not None:
            attempt_steps.extend(records)
        return payload.value

    async def compact(
        self, summary: str, *, keep: int, reason: Literal["threshold", "overflow"]
    ) -> None:
        """Journal a compaction: the transcript's last ``keep`` messages stay, under ``summary``.

        Replay and resume serve it back at the same point (it is an effect of the execution).
        """
        async with self._lock:
            self._check()
            intent = self._recorded.peek_intent()
            if intent is not None:
                if intent.kind != Compaction.KIND:
                    self._diverge(
                        f"seq {intent.seq} recorded {intent.kind}; the harness compacted",
                        at=intent,
                        got={"kind": Compaction.KIND},
                    )
                self._recorded.take_intent()
                return
            self._live_allowed("a compaction", {"kind": Compaction.KIND})
            view = self._log.view
            if view is None:
                raise JournalError("this journal keeps no view of its log, so it cannot compact")
            await self._append(())  # the kept messages are counted from the durable log
            await view.refresh(self._log.store, self._log.conversation_id, lean=True)
            seqs = view.message_seqs()
            if not seqs:
                return
            first_kept = seqs[-keep] if 0 < keep <= len(seqs) else seqs[-1] + 1
            await self._append(
                [Compaction(summary=summary, first_kept_seq=first_kept, reason=reason)]
            )

    async def steering(self, modes: Sequence[str] = ("steer", "follow_up")) -> list[Message]:
        """Messages delivered at this safe point (journaled, replayed): ``steer`` messages
        (after a tool batch) and/or ``follow_up`` ones (after a text-only answer)."""
        async with self._lock:
            self._check()
            delivered: list[Record] = []
            while (
                intent := self._recorded.peek_intent()
            ) is not None and intent.kind == SteerReceived.KIND:
                delivered.append(self._recorded.take_intent())
            if (
                delivered
                or intent is not None
                or self.mode is Mode.REPLAY
                or self._steer_source is None
            ):
                return messages_of(delivered)
            steers = list(await self._steer_source(tuple(modes)))
            if not steers:
                return []
            return messages_of(await self._append(steers))


def _is_sleep(record: Record, name: str, timer: str) -> bool:
    """Whether ``record`` is the ``name`` step (start or end) of the sleep ``timer``."""
    payload = record.payload
    return (
        isinstance(payload, StepRecorded)
        and payload.name == name
        and isinstance(payload.value, dict)
        and payload.value.get("timer") == timer
    )


def _refused(call: ToolCall, reason: str) -> ToolResult:
    """A task call's answer when the delegation refuses it: an error the model reads."""
    return ToolResult(
        call_id=call.call_id, content=reason, is_error=True, status=ToolOutcomeStatus.ERROR
    )
