"""Observer events and interceptors: the engine's seams for logging, metrics and tracing.

Observers receive typed events and can never fail a run. Interceptors wrap the attempt,
operation, model-turn and tool boundaries; they compose in registration order (the first
registered is outermost) and must call ``call_next`` exactly once. Context set in a
``contextvars.ContextVar`` by an outer interceptor is visible to the inner ones, since
every boundary runs inside the same task.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import JsonValue

from tether.messages import ModelRequest, ModelResponse, ToolCall, ToolResult, Usage
from tether.models import DeltaSink, Model
from tether.records import Compaction, Record
from tether.store import SessionKey, Submission

__all__ = (
    "ApprovalDecidedEvent",
    "AttemptStarted",
    "Compacted",
    "Correlation",
    "DeltaReceived",
    "EngineEvent",
    "InputAnsweredEvent",
    "Instrumentation",
    "Interceptor",
    "ModelCallFailed",
    "Observer",
    "Operation",
    "OperationEnded",
    "OperationStarted",
    "RecoveryDecided",
    "SubmissionAdmitted",
    "SubmissionClaimed",
    "SubmissionResumed",
    "SubmissionSettledEvent",
    "SubmissionSpawned",
    "SubmissionWaiting",
    "ToolEnded",
    "ToolProgress",
    "ToolStarted",
    "TurnEnded",
    "TurnStarted",
    "WebhookAttempted",
)

logger = logging.getLogger("tether.engine")
T = TypeVar("T")
Boundary = Literal["attempt", "operation", "turn", "tool"]


@dataclass(frozen=True, slots=True)
class Correlation:
    """The ids an event shares with the records it relates to."""

    session_key: SessionKey
    conversation_id: str
    submission_id: str
    attempt_id: str | None = None
    trace: Mapping[str, str] | None = None
    """The W3C trace context the submission was dispatched with (a tracer's parent)."""

    @classmethod
    def of(cls, submission: Submission) -> Correlation:
        return cls(
            submission.key,
            submission.conversation_id,
            submission.id,
            submission.attempt_id,
            submission.trace,
        )

    def log_fields(self) -> dict[str, str | None]:
        """The ids as a log record's ``extra`` fields, for a structured handler (``tether serve
        --log-format json`` writes them): ``submission_id``, ``conversation_id``, ``session``
        (``agent/instance/session``) and ``attempt_id``.

        Example::

            logger.warning("gave up", extra=Correlation.of(submission).log_fields())
        """
        return {
            "submission_id": self.submission_id or None,
            "conversation_id": self.conversation_id,
            "session": str(self.session_key),
            "attempt_id": self.attempt_id,
        }


@dataclass(frozen=True, slots=True)
class EngineEvent:
    kind: ClassVar[str]
    correlation: Correlation


@dataclass(frozen=True, slots=True)
class SubmissionAdmitted(EngineEvent):
    kind = "admitted"
    input: dict[str, Any] = field(default_factory=dict)
    created: bool = True


@dataclass(frozen=True, slots=True)
class SubmissionClaimed(EngineEvent):
    kind = "claimed"
    owner_id: str = ""
    attempt_count: int = 0


@dataclass(frozen=True, slots=True)
class SubmissionSpawned(EngineEvent):
    """A task call admitted a child submission (the correlation is the child's)."""

    kind = "spawned"
    parent_submission_id: str = ""
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class SubmissionWaiting(EngineEvent):
    """A submission parked, holding no lease: for an approval or for its children."""

    kind = "waiting"
    reason: str = ""
    children: tuple[str, ...] = ()
    """For ``reason="children"``: the child submissions it waits for."""


@dataclass(frozen=True, slots=True)
class SubmissionResumed(EngineEvent):
    """A parked run goes on with what it waited for (``reason``, as its
    :class:`SubmissionWaiting` said): ``approval`` (the approval ``gate_id`` was decided),
    ``input`` (the input ``gate_id`` was answered) or ``children`` (its task calls get the
    answers of ``children``). A run cut short is resumed as a recovery instead
    (:class:`RecoveryDecided`, ``decision="resume"``)."""

    kind = "resumed"
    reason: str = "children"
    gate_id: str = ""
    children: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AttemptStarted(EngineEvent):
    kind = "attempt_started"
    attempt_count: int = 0
    max_attempts: int = 0


@dataclass(frozen=True, slots=True)
class OperationStarted(EngineEvent):
    kind = "operation_started"
    operation: str = ""


@dataclass(frozen=True, slots=True)
class OperationEnded(EngineEvent):
    kind = "operation_ended"
    operation: str = ""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TurnStarted(EngineEvent):
    kind = "turn_started"
    model: str = ""


@dataclass(frozen=True, slots=True)
class TurnEnded(EngineEvent):
    """A request to the model ended (each try of a call is one): ``error`` if it failed,
    else the ``usage`` its provider reported (``None``: not reported)."""

    kind = "turn_ended"
    model: str = ""
    error: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True, slots=True)
class ToolStarted(EngineEvent):
    kind = "tool_started"
    call_id: str = ""
    tool: str = ""


@dataclass(frozen=True, slots=True)
class ToolEnded(EngineEvent):
    kind = "tool_ended"
    call_id: str = ""
    tool: str = ""
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ToolProgress(EngineEvent):
    """Partial output a running tool reported (ephemeral: never journaled)."""

    kind = "tool_progress"
    call_id: str = ""
    text: str = ""


@dataclass(frozen=True, slots=True)
class DeltaReceived(EngineEvent):
    kind = "delta"
    call_id: str = ""
    delta_kind: str = "text"
    text: str = ""


@dataclass(frozen=True, slots=True)
class Compacted(EngineEvent):
    """A compaction was journaled: ``reason`` is its record's (``manual`` for a queued one,
    ``threshold`` or ``overflow`` for the built-in agent's own)."""

    kind = "compaction"
    reason: str = "manual"


@dataclass(frozen=True, slots=True)
class RecoveryDecided(EngineEvent):
    kind = "recovery"
    decision: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SubmissionSettledEvent(EngineEvent):
    """A submission settled: ``settlement`` is its ``submission_settled`` record's payload
    (:class:`tether.records.SubmissionSettled`), as JSON."""

    kind = "settled"
    settlement: dict[str, JsonValue] = field(default_factory=dict)
    admitted_at: datetime | None = None
    """When the submission was admitted (its settle latency starts there)."""
    settled_at: datetime | None = None
    """When it settled, on the runtime's clock."""


@dataclass(frozen=True, slots=True)
class WebhookAttempted(EngineEvent):
    """An outbound webhook delivery was attempted (docs/how-to/webhooks.md): ``outcome`` is
    ``delivered`` (a 2xx), ``pending`` (it is tried again later) or ``failed`` (its last
    attempt); ``answer`` the receiver's HTTP status, ``error`` why it failed."""

    kind = "webhook_attempted"
    delivery_id: str = ""
    url: str = ""
    event: str = ""
    attempt: int = 0
    outcome: str = ""
    answer: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ApprovalDecidedEvent(EngineEvent):
    """A decision on a parked tool call was recorded (or an identical one repeated); the
    record itself is a :class:`tether.records.ApprovalDecided`."""

    kind = "approval_decided"
    approval_id: str = ""
    decision: str = ""
    approver: str = ""
    reason: str | None = None
    waited: float | None = None
    """Seconds from the request to the decision, by the two records' times."""
    gate: str = "approval"
    """The gate's kind: ``approval`` (a gated tool call) or ``budget`` (a run whose budget
    ran out; its record is a ``budget_decided``)."""


@dataclass(frozen=True, slots=True)
class InputAnsweredEvent(EngineEvent):
    """The answer to a parked question was recorded (or an identical one repeated); the
    record itself is a :class:`tether.records.InputAnswered`."""

    kind = "input_answered"
    input_id: str = ""
    responder: str = ""
    waited: float | None = None
    """Seconds from the question to the answer, by the two records' times."""


@dataclass(frozen=True, slots=True)
class ModelCallFailed(EngineEvent):
    """A try of a model call failed at the provider (a rate limit, a 5xx, a timeout, a
    connection that failed): ``status`` is the HTTP status if one came, ``code`` the
    :class:`~tether.errors.ProviderError`'s, ``retried`` whether the call tries again."""

    kind = "model_call_failed"
    status: int | None = None
    code: str = ""
    retried: bool = False


Observer = Callable[[EngineEvent], "Awaitable[None] | None"]


def compaction_events(correlation: Correlation, record: Record) -> list[EngineEvent]:
    """What observers hear of a durable ``compaction`` record: :class:`Compacted`, after a
    :class:`RecoveryDecided` (``compact_overflow``) when the context had overflowed."""
    compaction = record.payload
    assert isinstance(compaction, Compaction)  # the record's kind says so
    compacted = Compacted(correlation, reason=compaction.reason or "manual")
    if compaction.reason != "overflow":
        return [compacted]
    detail = f"first kept seq {compaction.first_kept_seq}"
    return [RecoveryDecided(correlation, decision="compact_overflow", detail=detail), compacted]


@dataclass(frozen=True, slots=True)
class Operation:
    """The boundary an interceptor wraps."""

    boundary: Boundary
    name: str
    correlation: Correlation
    call_id: str | None = None
    provider: str | None = None
    """For a model turn, the provider its client says it calls (the model's ``provider``
    attribute, when it has one: ``openai``), for tracing; ``name`` is the request's model."""


Interceptor = Callable[[Operation, Callable[[], Awaitable[Any]]], Awaitable[Any]]


class Instrumentation:
    def __init__(
        self,
        observers: Sequence[Observer],
        interceptors: Sequence[Interceptor],
        *,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.observers = list(observers)
        self.interceptors = list(interceptors)
        self.redact: Callable[[str], str] = redact or str
        """Masks secrets in the error text events carry (observers export it)."""

    async def emit(self, event: EngineEvent) -> None:
        for observer in self.observers:
            try:
                result = observer(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # an observer never fails a run
                logger.exception("observer %r failed on %s", observer, event.kind)

    async def intercept(self, operation: Operation, fn: Callable[[], Awaitable[T]]) -> T:
        call: Callable[[], Awaitable[Any]] = fn
        for interceptor in reversed(self.interceptors):
            call = _once(interceptor, operation, call)
        result: T = await call()
        return result

    def trace_context(self) -> dict[str, str] | None:
        """The current trace context (``traceparent``…) as an interceptor that traces sees
        it, for work handed on to run elsewhere (a child submission) to join the trace: the
        first interceptor with a ``current_trace_context()`` that answers one."""
        for interceptor in self.interceptors:
            current = getattr(interceptor, "current_trace_context", None)
            found = current() if callable(current) else None
            if found:
                return dict(found)
        return None

    def model(self, inner: Model, correlation: Correlation) -> Model:
        return _InstrumentedModel(inner, self, correlation)

    def tools(self, inner: Any, correlation: Correlation) -> Any:
        return _InstrumentedTools(inner, self, correlation)


def _once(
    interceptor: Interceptor, operation: Operation, inner: Callable[[], Awaitable[Any]]
) -> Callable[[], Awaitable[Any]]:
    async def call() -> Any:
        calls = 0

        async def call_next() -> Any:
            nonlocal calls
            calls += 1
            if calls > 1:
                raise RuntimeError(f"interceptor {interceptor!r} called next twice")
            return await inner()

        result = await interceptor(operation, call_next)
        if calls == 0:
            raise RuntimeError(f"interceptor {interceptor!r} refused the {operation.boundary}")
        return result

    return call


class _InstrumentedModel:
    def __init__(
        self, inner: Model, instrumentation: Instrumentation, correlation: Correlation
    ) -> None:
        self._inner = inner
        self._instrumentation = instrumentation
        self._correlation = correlation

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        events = self._instrumentation
        await events.emit(TurnStarted(self._correlation, model=request.model))
        error: str | None = None
        usage: Usage | None = None
        operation = Operation(
            "turn", request.model, self._correlation, provider=_provider(self._inner)
        )
        try:
            response = await events.intercept(
                operation, lambda: self._inner.request(request, stream)
            )
            usage = response.usage
            return response
        except BaseException as exc:
            error = events.redact(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            await events.emit(
                TurnEnded(self._correlation, model=request.model, error=error, usage=usage)
            )


def _provider(model: Model) -> str | None:
    """The provider a model client says it calls; a failing attribute never fails a call."""
    try:
        provider = getattr(model, "provider", None)
    except Exception:
        return None
    return provider if isinstance(provider, str) and provider else None


class _InstrumentedTools:
    def __init__(
        self, inner: Any, instrumentation: Instrumentation, correlation: Correlation
    ) -> None:
        self._inner = inner
        self._instrumentation = instrumentation
        self._correlation = correlation

    async def execute(self, call: ToolCall, scope: Any) -> ToolResult:
        events = self._instrumentation
        await events.emit(ToolStarted(self._correlation, call_id=call.call_id, tool=call.name))
        is_error = True
        try:
            result: ToolResult = await events.intercept(
                Operation("tool", call.name, self._correlation, call_id=call.call_id),
                lambda: self._inner.execute(call, scope),
            )
            is_error = result.is_error
            return result
        finally:
            await events.emit(
                ToolEnded(
                    self._correlation, call_id=call.call_id, tool=call.name, is_error=is_error
                )
            )
