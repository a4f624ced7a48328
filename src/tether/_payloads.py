"""Typed payloads, one model per record kind (docs/architecture.md §3).

Payloads are frozen pydantic models with camelCase wire names. Fields are only ever
added, never repurposed: a log written today must decode the same way forever.
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar, Literal

from pydantic import Field, JsonValue

from tether._wire import JsonObject, WireModel
from tether.messages import Mediation, Message, ToolOutcomeStatus, Usage

__all__ = (
    "Actor",
    "ApprovalDecided",
    "ApprovalRequested",
    "AssistantMessageCompleted",
    "AssistantMessageStarted",
    "AssistantTextDelta",
    "AssistantThinkingDelta",
    "AttachmentRef",
    "BudgetDecided",
    "BudgetRequested",
    "Compaction",
    "ConversationCreated",
    "ConversationParent",
    "ExecutionEnded",
    "ExecutionFailed",
    "ExecutionStarted",
    "InputAnswered",
    "InputRequested",
    "LogTruncated",
    "Mediation",
    "ModelCalled",
    "PatchMarked",
    "Payload",
    "SettlementStatus",
    "Signal",
    "SteerReceived",
    "StepRecorded",
    "SubmissionSettled",
    "TaskFinished",
    "TaskSpawned",
    "ToolCalled",
    "ToolOutcome",
    "ToolOutcomeStatus",
    "Usage",
    "UserMessage",
    "VersionChanged",
)


class Payload(WireModel):
    """Base class of record payloads; ``KIND`` names the record kind it belongs to."""

    KIND: ClassVar[str]


class AttachmentRef(WireModel):
    """A reference to bytes in the attachment store."""

    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    media_type: str
    size: int = Field(ge=0)


class Actor(WireModel):
    """Who put a record in, as the server verified them (``tether.auth.Identity``): their
    ``subject``, their ``tenant`` (none: an operator), and the name people are shown."""

    subject: str = Field(min_length=1, max_length=500)
    tenant: str | None = Field(default=None, min_length=1, max_length=500)
    display: str | None = Field(default=None, max_length=500)


class ConversationParent(WireModel):
    """Where a child conversation branched off."""

    conversation_id: str
    seq: int = Field(ge=1)
    reason: Literal["fork", "task"]
    call_id: str | None = None
    """For a task child: the parent's task call it answers (``seq`` is its record)."""


class SettlementStatus(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"


class ConversationCreated(Payload):
    KIND = "conversation_created"
    agent: str
    instance: str
    session: str
    parent: ConversationParent | None = None
    by: Actor | None = None
    """Who made it, when the server knew: a fork an authenticated request asked for."""


class UserMessage(Payload):
    KIND = "user_message"
    body: str
    attachments: tuple[AttachmentRef, ...] | None = None
    by: Actor | None = None
    """Who sent it, when the server knew (an authenticated request)."""


class Signal(Payload):
    KIND = "signal"
    type: str = Field(min_length=1)
    body: str
    sender: dict[str, str] | None = None
    tag: str | None = None
    by: Actor | None = None


class ExecutionStarted(Payload):
    KIND = "execution_started"
    harness: str
    harness_version: str
    input_count: int = Field(ge=0)
    config: JsonObject | None = None
    version: str | None = None
    """The agent version the execution runs (the host's name for it), if it has one."""
    pins: JsonObject | None = None
    """What identifies the agent's behaviour, as the host computed it (its harness, system
    prompt, tool schemas and model, say, as digests): opaque to the journal, which compares
    it only to say what changed when a later version meets this execution's log."""


class ModelCalled(Payload):
    KIND = "model_called"
    call_id: str
    model: str
    input_hash: str


class AssistantMessageStarted(Payload):
    KIND = "assistant_message_started"
    call_id: str
    model: str | None = None


class AssistantTextDelta(Payload):
    KIND = "assistant_text_delta"
    call_id: str
    text: str


class AssistantThinkingDelta(Payload):
    KIND = "assistant_thinking_delta"
    call_id: str
    text: str
    summary: bool | None = None
    """Set when the text summarizes the model's reasoning rather than being the reasoning."""


class AssistantMessageCompleted(Payload):
    KIND = "assistant_message_completed"
    call_id: str
    message: Message
    usage: Usage | None = None
    finish_reason: str | None = None
    interrupted: bool | None = None
    """Set when a crash cut the stream: the partial message closes it and is never served."""
    purpose: Literal["summary"] | None = None
    """A completion for the harness's own use (a compaction summary): not part of the transcript."""
    cost: float | None = None
    """The call's cost in US dollars as the journal priced it when it was answered
    (``tether.models.cost_of``), when it is known and not zero: what a tenant's usage
    aggregate adds up in the store (docs/budgets.md)."""


class ToolCalled(Payload):
    KIND = "tool_called"
    call_id: str
    tool: str
    args: JsonObject
    idempotency_key: str
    mediation: Mediation
    idempotent: bool | None = None
    """Whether re-running the tool under the same key is safe (recovery re-drives it)."""


class ApprovalRequested(Payload):
    KIND = "approval_requested"
    approval_id: str
    call_id: str
    tool: str
    args: JsonObject
    args_digest: str
    reason: str | None = None
    parameters: JsonObject | None = None
    """The JSON Schema of the tool's arguments as the model was offered it, when the turn
    knew it: an ``edit`` decision must fit it."""
    metadata: JsonObject | None = None
    """What the framework attached to the request (pydantic-ai's ``ApprovalRequired``
    metadata): the call's ``ToolCall.metadata``."""


class ApprovalDecided(Payload):
    KIND = "approval_decided"
    approval_id: str
    call_id: str
    decision: Literal["approve", "reject", "edit"]
    args: JsonObject | None = None
    reason: str | None = None
    approver: str
    """The name the decider goes by (a display name: ``by`` is who they are)."""
    by: Actor | None = None


class InputRequested(Payload):
    """The execution asks a human for a value and parks until it is given (a call whose
    result a person supplies: ``Mediation.INPUT``). ``input_id`` names the wait everywhere,
    as an approval id does: ``{conversation id}.{seq of this record}``."""

    KIND = "input_requested"
    input_id: str
    call_id: str
    tool: str
    """What asked: a harness's question (``ask``), LangGraph's ``interrupt``, a deferred tool."""
    args: JsonObject
    """What the asker passed along (an interrupt's value is ``{"value": ...}``)."""
    prompt: str
    """The question, as a person reads it."""
    answer_schema: JsonObject | None = None
    """The JSON Schema the answer must fit; ``None`` takes any JSON value."""
    metadata: JsonObject | None = None
    """What the framework attached to the request (pydantic-ai's ``CallDeferred``
    metadata): the call's ``ToolCall.metadata``."""


class InputAnswered(Payload):
    KIND = "input_answered"
    input_id: str
    call_id: str
    value: JsonValue = None
    """The answer. A ``null`` one is written as no ``value`` at all (the wire omits nulls),
    so reading it back needs this default."""
    responder: str
    by: Actor | None = None


class BudgetRequested(Payload):
    """A submission's budget ran out under the ``park`` policy: it waits on a ``budget`` gate
    for a person to extend it (``budget_decided``). ``gate_id`` names the wait as an approval
    id does: ``{conversation id}.{seq of this record}``. Written outside any execution (the
    run's execution is left unfinished, to be resumed), with the submission's id."""

    KIND = "budget_requested"
    gate_id: str
    limit: str
    """The limit used up, by its wire name (``modelCalls``, ``tokens``, ``costUsd``,
    ``toolCalls``, ``wallTime``)."""
    used: float
    max: float
    spent: JsonObject
    """What the submission had spent, each limit by its wire name (``costUsd`` ``null`` when
    unknown, ``wallTime`` in seconds)."""
    budget: JsonObject
    """The budget in force, extensions included (a ``Budget``'s wire form)."""
    scope: Literal["session", "tenant"] | None = None
    """``session``: the session's budget ran out (every submission of the session counts
    against it, and an extension raises it for them all); ``tenant``: its tenant's budget of
    a period ran out (an extension lets this submission go on past it by that much);
    absent: the submission's own."""


class BudgetDecided(Payload):
    """A person's decision on a ``budget`` gate: ``approve`` adds ``extension`` (a
    ``Budget``'s wire form: the amounts each limit grows by) to the submission's budget for
    every later attempt; ``reject`` settles it ``budget_exhausted``."""

    KIND = "budget_decided"
    gate_id: str
    decision: Literal["approve", "reject"]
    extension: JsonObject | None = None
    reason: str | None = None
    approver: str
    by: Actor | None = None


class ToolOutcome(Payload):
    KIND = "tool_outcome"
    call_id: str
    content: str
    data: JsonValue = None
    is_error: bool = False
    status: ToolOutcomeStatus = ToolOutcomeStatus.OK


class StepRecorded(Payload):
    KIND = "step_recorded"
    call_id: str
    name: str
    value: JsonValue = None
    """Left out of the canonical JSON when null, as every null is: it reads back as null."""


class SteerReceived(Payload):
    KIND = "steer_received"
    body: str
    mode: Literal["steer", "follow_up"]
    attachments: tuple[AttachmentRef, ...] | None = None
    source_submission_id: str | None = None
    """The submission that carried the message in (it settles with the execution it joined)."""
    by: Actor | None = None


class Compaction(Payload):
    KIND = "compaction"
    summary: str
    first_kept_seq: int = Field(ge=1)
    reason: Literal["manual", "overflow", "threshold"] | None = None


class TaskSpawned(Payload):
    KIND = "task_spawned"
    call_id: str
    agent: str
    instance: str
    session: str
    child_conversation_id: str
    child_submission_id: str


class TaskFinished(Payload):
    """A child's end as its parent recorded it, beside the task call's ``tool_outcome``.

    ``result`` is the child's answer (its text, or its JSON for a result schema), or for a
    child that did not succeed the partial output it left; ``usage``, ``model_calls`` and
    ``cost`` total the child's model calls (its own children's included), so the parent's
    log alone rolls them up."""

    KIND = "task_finished"
    call_id: str
    child_conversation_id: str
    child_submission_id: str
    status: SettlementStatus
    result: JsonValue = None
    error: str | None = None
    error_code: str | None = None
    agent: str | None = None
    usage: Usage | None = None
    model_calls: int | None = None
    cost: float | None = None


class VersionChanged(Payload):
    """The execution goes on under another agent version than the one it started on.

    Appended in the execution it concerns, before any effect of the new version: by a
    resume under the ``upgrade`` policy that found a recorded model call whose input the new
    code builds differently (``reason="upgrade"``, ``diverged_at`` that call's seq), or by an
    operator moving a parked run (``reason="operator"``). Not an effect: replay and resume
    neither serve it nor require it consumed. Its seq says where the code changed: a
    recorded model call before it may differ from what the code asks for (docs/architecture.md §5).
    """

    KIND = "version_changed"
    from_version: str | None
    to_version: str | None
    reason: Literal["upgrade", "operator"]
    actor: str | None = None
    diverged_at: int | None = Field(default=None, ge=1)
    """The seq of the first recorded model call whose input differed, if one did."""
    differs: tuple[str, ...] = ()
    """What differs, in words: ``system prompt``, ``tool schema: <name>``, ``tool set: +x -y``,
    ``model``, ``harness``, ``history``."""


class PatchMarked(Payload):
    """The execution took the new branch of a patch (``Turn.patched``): an intent, served
    in order by resume and replay, so an execution that passed the point before the patch
    existed keeps the old branch."""

    KIND = "patch_marked"
    patch_id: str = Field(min_length=1)


class ExecutionEnded(Payload):
    KIND = "execution_ended"
    output: JsonValue = None


class ExecutionFailed(Payload):
    KIND = "execution_failed"
    error: str
    error_code: str | None = None
    transient: bool = False


class SubmissionSettled(Payload):
    KIND = "submission_settled"
    status: SettlementStatus
    error: str | None = None
    error_code: str | None = None
    result: JsonValue = None
    error_details: JsonObject | None = None
    """What a failure's code says more precisely: for a ``provider_*`` code the provider's
    HTTP ``status`` (when it answered one) and the ``tries`` (requests made)."""
    aborted_by: Actor | None = None
    """Who aborted it, as the server verified them (an ``aborted`` settlement of a cancel an
    authenticated request asked for)."""


class LogTruncated(Payload):
    """What stands in for a log's head once retention removed it (docs/retention.md).

    A store keeps this record at the seq of the last record removed, with that record's
    ``prevHash`` and ``hash``: the record after it links to it as it linked to the one it
    replaces, so the rest of the chain verifies from here (``last_hash`` binds this record's
    content to that place). It carries what reading the removed records would have left: the
    transcript as it stood (the active path of the tree, each node's parent, how many
    messages each record on it stood for, and the messages), the log's last
    ``conversation_created`` (its wire form), the fork marker's seq, the delivered steers,
    and the usage of the model calls removed.
    """

    KIND = "log_truncated"
    last_hash: str = Field(min_length=1)
    truncated_at: str
    """When the head was removed (RFC 3339); the record's own ``time`` is the removed one's."""
    removed: int = Field(ge=1)
    """Records removed, this one's place included: every seq up to its own."""
    path: list[int]
    parents: list[int | None]
    groups: list[tuple[int, int]]
    messages: list[Message]
    created: JsonObject | None = None
    fork_seq: int = Field(default=0, ge=0)
    steer_sources: dict[str, str] = Field(default_factory=dict)
    usage: Usage | None = None
    model_calls: int = Field(default=0, ge=0)
    cost: float | None = None
