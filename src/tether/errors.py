"""Typed errors raised by Tether.

Every failure a caller can act on has its own class. Each class carries a stable
``code`` (used as the ``type`` of the HTTP error envelope) and keeps the details a
caller needs as attributes, so nothing has to be parsed out of a message.

Example::

    from tether.errors import Conflict

    try:
        await store.append(conversation_id, drafts, expected_seq=head, fence=fence)
    except Conflict as exc:
        head = exc.actual_seq  # someone else appended first: re-read and retry
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self

__all__ = (
    "ApprovalBlocked",
    "ApprovalConflict",
    "ApprovalNotFound",
    "ApprovalParked",
    "AttachmentNotFound",
    "CanonicalizationError",
    "ChildrenPending",
    "ClaimLost",
    "Conflict",
    "ContextOverflow",
    "ConversationNotFound",
    "DispatchConflict",
    "DuplicateCallId",
    "ExportRefused",
    "FailpointSpecInvalid",
    "Fenced",
    "Forbidden",
    "HarnessMismatch",
    "HostOwnedOutcome",
    "IdentityProviderUnavailable",
    "IncompleteInvocation",
    "InheritedToolIntent",
    "InputClosed",
    "InputConflict",
    "InputNotFound",
    "InputParked",
    "InvalidAnswer",
    "InvalidApproval",
    "InvalidCursor",
    "InvalidDispatch",
    "InvalidEditArgs",
    "InvalidExecutionLog",
    "InvalidMetadata",
    "InvalidSeq",
    "JournalError",
    "LogTampered",
    "McpServerUnavailable",
    "McpToolsChanged",
    "MissingIdempotencyKey",
    "MissingToolExecutor",
    "ModelError",
    "ModelFatalError",
    "ModelTransientError",
    "NoPendingExecution",
    "NoRunInFlight",
    "NotFound",
    "NotJournaled",
    "Parked",
    "ProviderError",
    "ProviderRateLimited",
    "ProviderTimeout",
    "RecordDecodeError",
    "RecordedModelFailure",
    "ReplayDiverged",
    "RuntimeClosed",
    "SeqOutOfRange",
    "SeqTruncated",
    "SessionBusy",
    "SessionExists",
    "StoreCapabilityMissing",
    "StoreError",
    "StoreUnavailable",
    "SubagentLimitReached",
    "SubmissionNotFound",
    "TenantNotFound",
    "TetherError",
    "TimerParked",
    "TokenExists",
    "TokenNotFound",
    "TransientError",
    "TurnClosed",
    "Unauthenticated",
    "UnknownAgent",
    "UnknownVersion",
    "UnmediatedToolCall",
    "UnsupportedConstruct",
    "UnsupportedSchema",
    "VersionConflict",
)


class TetherError(Exception):
    """Base class of every error Tether raises on purpose."""

    code: str = "tether_error"


# --- encoding -------------------------------------------------------------------------


class CanonicalizationError(TetherError, ValueError):
    """A value cannot be written as RFC 8785 canonical JSON (NaN, infinity, a non-JSON type)."""

    code = "invalid_json_value"


class RecordDecodeError(TetherError, ValueError):
    """A record (or its payload) does not match its schema.

    ``field`` is the dotted path of the first offending field, e.g. ``payload.callId``.
    """

    code = "invalid_record"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class ExportRefused(TetherError, ValueError):
    """An exported log that is not taken in as it stands. ``problem`` says why, for a
    program: ``trailer_missing`` (a file cut short), ``trailer_mismatch`` (the trailer does
    not describe the records, or is not one), ``bad_signature`` (a trusted key's signature
    does not verify: the file changed after it was signed), ``unsigned`` or
    ``untrusted_key`` (a signature was required), ``unverifiable_anchor`` (it starts at a
    ``log_truncated`` record nothing vouches for), ``changed`` (the file changed while it
    was imported); ``reason`` says it for a person."""

    code = "export_refused"

    def __init__(self, problem: str, reason: str) -> None:
        self.problem = problem
        self.reason = reason
        super().__init__(reason)


# --- identity ---------------------------------------------------------------------------


class Unauthenticated(TetherError):
    """A request whose credential is missing, malformed, unknown, expired or revoked
    (HTTP 401). The message says which, never the credential."""

    code = "unauthorized"


class Forbidden(TetherError):
    """The caller's identity lacks ``scope`` for what it asked (HTTP 403), or an
    application's ``authorize`` refused it (``scope`` is then ``None``; ``action``, the
    route's scope, and ``resource``, the kind of what it names, say what was refused)."""

    code = "forbidden"

    def __init__(
        self,
        message: str,
        *,
        scope: str | None = None,
        action: str | None = None,
        resource: str | None = None,
    ) -> None:
        self.scope = scope
        self.action = action
        self.resource = resource
        super().__init__(message)


class IdentityProviderUnavailable(TetherError):
    """The identity provider's keys (its JWKS, at ``url``) could not be fetched: refused,
    timed out, an answer other than 200, or not a key set (HTTP 503: the credential may be
    fine; retry later). ``url`` is shown without its query or credentials.

    Example::

        try:
            identity = await authenticate.verify(token)
        except IdentityProviderUnavailable as exc:
            print(exc.url)  # "https://issuer.example/.well-known/jwks.json"
    """

    code = "identity_provider_unavailable"

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"the identity provider's keys at {url} could not be fetched: {reason}")


# --- stores ---------------------------------------------------------------------------


class StoreError(TetherError):
    """Base class of the errors a store raises; no backend exception escapes a store."""

    code = "store_error"


class StoreUnavailable(StoreError):
    """The backend failed (I/O error, lock timeout, closed store). Retrying may succeed."""

    code = "store_unavailable"


class UnsupportedSchema(StoreError):
    """The database was written by a newer Tether whose schema this version cannot read."""

    code = "unsupported_schema"

    def __init__(self, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"database schema version {found} is newer than the supported version {supported}; "
            "upgrade tether to open it"
        )


class StoreCapabilityMissing(StoreError):
    """A feature needs a capability the store does not offer (``capability``: its name,
    ``gates``, ``children``, ``schedules``...; ``protocol``: the protocol of
    :mod:`tether.store` a store implements to offer it). The store is fine; this feature
    cannot run on it.

    Example::

        try:
            await runtime.approvals()
        except StoreCapabilityMissing as exc:
            print(exc.capability)  # "gates"
    """

    code = "store_capability_missing"

    def __init__(self, capability: str, protocol: str) -> None:
        self.capability = capability
        self.protocol = protocol
        super().__init__(
            f"the store does not offer the {capability!r} capability ({protocol}), which this needs"
        )


class Conflict(StoreError):
    """An append's ``expected_seq`` is not the conversation's head: another writer went first."""

    code = "conflict"

    def __init__(self, conversation_id: str, expected_seq: int, actual_seq: int) -> None:
        self.conversation_id = conversation_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq
        super().__init__(
            f"conversation {conversation_id}: expected head {expected_seq}, found {actual_seq}"
        )


class Fenced(StoreError):
    """An append carries a fence lower than the conversation's: its writer was superseded."""

    code = "fenced"

    def __init__(self, conversation_id: str, fence: int, current_fence: int) -> None:
        self.conversation_id = conversation_id
        self.fence = fence
        self.current_fence = current_fence
        super().__init__(
            f"conversation {conversation_id}: fence {fence} is below the current fence "
            f"{current_fence}; this writer was superseded"
        )


class ClaimLost(StoreError):
    """A submission is not in the state (or not owned by the attempt) the operation requires."""

    code = "claim_lost"

    def __init__(self, submission_id: str, reason: str) -> None:
        self.submission_id = submission_id
        self.reason = reason
        super().__init__(f"submission {submission_id}: {reason}")


class DispatchConflict(StoreError):
    """A dispatch id was reused within one session key with a different payload."""

    code = "dispatch_conflict"

    def __init__(self, dispatch_id: str, session_key: str) -> None:
        self.dispatch_id = dispatch_id
        self.session_key = session_key
        super().__init__(
            f"dispatch id {dispatch_id!r} was already used in {session_key} "
            "with a different payload"
        )


class VersionConflict(StoreError):
    """A submission's agent version was not changed (``VersionStore.set_version``): its
    stored version is not the one the caller expected (``actual``), or its status forbids
    a change (only a queued or waiting submission's version may change). Nothing was
    written."""

    code = "version_conflict"

    def __init__(
        self, submission_id: str, *, expected: str | None, actual: str | None, status: str
    ) -> None:
        self.submission_id = submission_id
        self.expected = expected
        self.actual = actual
        self.status = status
        super().__init__(
            f"submission {submission_id}: cannot change its version from {expected!r} "
            f"(it is {actual!r}, status {status})"
        )


class TokenExists(StoreError):
    """A token was not kept (``TokenStore.put_token``): a kept one already has its id or
    its digest (``taken``: ``"id"`` or ``"digest"``). Nothing was written."""

    code = "token_exists"

    def __init__(self, token_id: str, *, taken: str) -> None:
        self.token_id = token_id
        self.taken = taken
        super().__init__(f"token {token_id}: a kept token already has this {taken}")


class SubagentLimitReached(StoreError):
    """A child submission would take its subagent tree past its total
    (``TaskParent.max_total``): ``root_submission_id``'s tree holds ``limit`` submissions
    below it already. Nothing was admitted."""

    code = "subagent_limit_reached"

    def __init__(self, root_submission_id: str, limit: int) -> None:
        self.root_submission_id = root_submission_id
        self.limit = limit
        super().__init__(
            f"the subagent tree of submission {root_submission_id} holds its limit of "
            f"{limit} submissions"
        )


class SeqOutOfRange(StoreError, ValueError):
    """A sequence number lies outside the conversation's log (for example a fork past the head)."""

    code = "seq_out_of_range"

    def __init__(self, conversation_id: str, seq: int, head: int) -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.head = head
        super().__init__(f"conversation {conversation_id}: seq {seq} is outside 1..{head}")


class SeqTruncated(StoreError, LookupError):
    """A sequence number names a record that retention removed: the log now starts at its
    ``log_truncated`` record, at ``first`` (docs/retention.md)."""

    code = "seq_truncated"

    def __init__(self, conversation_id: str, seq: int, first: int) -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.first = first
        super().__init__(
            f"conversation {conversation_id}: seq {seq} was truncated away; the log starts "
            f"at {first}"
        )


class InvalidSeq(TetherError, ValueError):
    """A sequence number no log can hold: negative, or past ``2**63 - 1`` (the largest a
    store keeps). Raised before any store is asked; ``field`` names the culprit."""

    code = "invalid_seq"

    def __init__(self, value: int, *, field: str, least: int = 0) -> None:
        self.value = value
        self.field = field
        super().__init__(f"{field}: {value} is outside {least}..{2**63 - 1}")


class InvalidCursor(TetherError, ValueError):
    """A paging cursor that no listing handed out (``GateStore.list_gates``' ``after``,
    ``GET /approvals?cursor=``). Raised before any row is read; ``field`` names it."""

    code = "invalid_cursor"

    def __init__(self, message: str, *, field: str = "cursor") -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class InvalidMetadata(TetherError, ValueError):
    """Session metadata out of its bounds (``tether.store.METADATA_LIMITS``): not a JSON
    object, too many keys, a key too long or empty, a value that is no string, number or
    boolean, or too large once serialized. Raised before anything is written; ``field``
    names the culprit (``metadata`` or ``metadata.<key>``)."""

    code = "invalid_metadata"

    def __init__(self, message: str, *, field: str = "metadata") -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class SessionExists(StoreError):
    """A new conversation was asked for a session key that already has one (e.g. a fork target)."""

    code = "session_exists"

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key
        super().__init__(f"session {session_key} already has a conversation")


class LogTampered(StoreError):
    """Verification re-derived a hash that differs from the stored chain at ``seq``."""

    code = "log_tampered"

    def __init__(self, conversation_id: str, seq: int, reason: str) -> None:
        self.conversation_id = conversation_id
        self.seq = seq
        self.reason = reason
        super().__init__(f"conversation {conversation_id}: chain broken at seq {seq}: {reason}")


class NotFound(StoreError, LookupError):
    """Base class of the unknown-id errors."""

    code = "not_found"


class SubmissionNotFound(NotFound):
    """No submission has this id."""

    code = "submission_not_found"

    def __init__(self, submission_id: str) -> None:
        self.submission_id = submission_id
        super().__init__(f"submission {submission_id} not found")


class ConversationNotFound(NotFound):
    """No conversation has this id (or session key)."""

    code = "conversation_not_found"

    def __init__(self, conversation: str) -> None:
        self.conversation = conversation
        super().__init__(f"conversation {conversation} not found")


class AttachmentNotFound(NotFound):
    """No attachment is stored under this digest."""

    code = "attachment_not_found"

    def __init__(self, digest: str) -> None:
        self.digest = digest
        super().__init__(f"attachment {digest} not found")


class TokenNotFound(NotFound):
    """No token has this id (``TokenStore.revoke_token``, ``tether tokens revoke``)."""

    code = "token_not_found"

    def __init__(self, token_id: str) -> None:
        self.token_id = token_id
        super().__init__(f"token {token_id} not found")


class TenantNotFound(NotFound):
    """No tenant by this name for the caller: an identity of one tenant asked about
    another's usage (``GET /usage``), which to it does not exist."""

    code = "tenant_not_found"

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        super().__init__(f"tenant {tenant} not found")


# --- journal --------------------------------------------------------------------------


class JournalError(TetherError):
    """Base class of the errors the effect journal raises."""

    code = "journal_error"


class ReplayDiverged(JournalError):
    """A harness asked for an effect the journal did not record at that point.

    Raised for a model input whose hash differs from the recorded one (I0), a tool call
    whose identity differs, an effect of the wrong kind, one effect too many, or effects
    left unconsumed. Once raised in a turn, every later effect call raises it again.

    The details, as far as the journal knows them: ``execution_id``; ``seq``, the record at
    which the code and the log part (``None`` when the code asked for more than the execution
    recorded); ``expected``, what the log holds there (``{"kind": ..., "payload": ...}``, the
    record's kind and payload; ``None`` when it holds nothing); ``got``, what the code asked
    for in the same shape (the record it would have written); ``request``, the
    :class:`~tether.messages.ModelRequest` the code made when it asked for the model (the
    log keeps only its hash); ``from_version``, the agent version the execution recorded,
    and ``to_version``, the one that replayed it (``None`` when unversioned); ``differs``,
    what differs between the two in words (``system prompt``, ``tool schema: <name>``,
    ``tool set: +x -y``, ``model``, ``harness``; ``history`` when the versions' pins agree
    or are unknown), named in the message as ``(version v1 -> v2: system prompt)`` when
    the code that replayed it named its version.
    """

    code = "replay_diverged"

    def __init__(
        self,
        message: str,
        *,
        execution_id: str | None = None,
        seq: int | None = None,
        expected: dict[str, Any] | None = None,
        got: dict[str, Any] | None = None,
        request: object = None,
        from_version: str | None = None,
        to_version: str | None = None,
        differs: tuple[str, ...] = (),
    ) -> None:
        self.execution_id = execution_id
        self.seq = seq
        self.expected = expected
        self.got = got
        self.request = request
        self.from_version = from_version
        self.to_version = to_version
        self.differs = differs
        if differs and to_version is not None:  # a replay that names no version: as before
            versions = f"{from_version or 'unversioned'} -> {to_version}"
            message = f"{message} (version {versions}: {', '.join(differs)})"
        super().__init__(message)


class McpToolsChanged(ReplayDiverged):
    """An MCP server offers other tools than the run recorded it offered (``tether.tools.mcp``):
    found when a resumed run (or one whose server was restarted) connects to it again. Like
    any divergence the run waits for a fix (the server's tools as they were, or code that
    expects the new ones) rather than going on with tools its model never saw.

    ``server`` names the server (its toolset's name); ``added``, ``removed`` and ``changed``
    name the tools offered now and not then, then and not now, and in both with another
    description, schema or annotations."""

    code = "mcp_tools_changed"

    def __init__(
        self,
        server: str,
        *,
        execution_id: str,
        added: tuple[str, ...] = (),
        removed: tuple[str, ...] = (),
        changed: tuple[str, ...] = (),
    ) -> None:
        self.server = server
        self.added = added
        self.removed = removed
        self.changed = changed
        differs = tuple(
            f"{what}: {', '.join(names)}"
            for what, names in (("added", added), ("removed", removed), ("changed", changed))
            if names
        )
        super().__init__(
            f"execution {execution_id}: the MCP server {server!r} changed its tools since the "
            f"run recorded them ({'; '.join(differs)})",
            execution_id=execution_id,
            differs=differs,
        )


class RecordedModelFailure(JournalError):
    """Replay reached a model call that failed live (no completion was recorded).

    Not sticky: a harness that handled the failure live can handle it again.
    """

    code = "recorded_model_failure"


class InvalidExecutionLog(JournalError):
    """The log's executions are malformed (a missing start, a wrong input count, ...)."""

    code = "invalid_execution_log"


class IncompleteInvocation(InvalidExecutionLog):
    """The pending execution recorded fewer inputs than it declared; exec it again."""

    code = "incomplete_invocation"


class InheritedToolIntent(InvalidExecutionLog):
    """A fork child holds an unresolved tool or approval inherited from its parent.

    The child may not resume or decide it; a fresh ``exec`` in the child is the way on.
    """

    code = "inherited_tool_intent"


class HarnessMismatch(JournalError):
    """The harness's name or version differs from the one the execution recorded."""

    code = "harness_mismatch"

    def __init__(self, recorded: tuple[str, str], served: tuple[str, str]) -> None:
        self.recorded = recorded
        self.served = served
        super().__init__(
            f"execution was recorded by harness {recorded[0]!r} version {recorded[1]!r}; "
            f"got {served[0]!r} version {served[1]!r}"
        )


class NoPendingExecution(JournalError):
    """The conversation has no pending execution (none started, or the last one ended): a
    record that belongs to one (``Journal.record_version_change``) has nowhere to go."""

    code = "no_pending_execution"


class Parked(JournalError):
    """The execution parked durably, waiting for something outside it: not a failure.

    Nothing is written for the park itself (no end, no failure record): the log already
    says what it waits for, and ``resume`` carries on once that has come.
    """

    code = "parked"


class ApprovalParked(Parked):
    """The execution parked durably on a tool that needs a human decision.

    Not a failure: nothing more is written until :meth:`Journal.approve` records a
    decision; then ``resume`` carries on. ``approval_id`` names the gate.
    """

    code = "approval_parked"

    def __init__(self, approval_id: str, execution_id: str, call_id: str, request_seq: int) -> None:
        self.approval_id = approval_id
        self.execution_id = execution_id
        self.call_id = call_id
        self.request_seq = request_seq
        super().__init__(f"execution {execution_id} is waiting for approval {approval_id}")


class InputParked(Parked):
    """The execution parked durably on a question for a human (``Turn.ask``, or a call of
    ``Mediation.INPUT``): nothing more is written until :meth:`Journal.answer` records the
    answer; then ``resume`` hands it to the harness. ``input_id`` names the wait."""

    code = "input_parked"

    def __init__(self, input_id: str, execution_id: str, call_id: str, request_seq: int) -> None:
        self.input_id = input_id
        self.execution_id = execution_id
        self.call_id = call_id
        self.request_seq = request_seq
        super().__init__(f"execution {execution_id} is waiting for input {input_id}")


class ChildrenPending(Parked):
    """The execution parked durably on task calls whose child submissions have not settled.

    Each call's ``task_spawned`` record is in the log; ``resume`` serves the children's
    answers once they have settled (the engine requeues the parent when the last does).
    """

    code = "children_pending"

    def __init__(self, execution_id: str, call_ids: tuple[str, ...]) -> None:
        self.execution_id = execution_id
        self.call_ids = call_ids
        super().__init__(
            f"execution {execution_id} is waiting for the children of {', '.join(call_ids)}"
        )


class TimerParked(Parked):
    """The execution parked durably on a timer (``Turn.sleep``, ``Turn.sleep_until``): its
    start is in the log with the time it wakes (``wake_at``, UTC); the engine requeues the
    submission then, with no process holding it meanwhile, and ``resume`` returns from the
    sleep. ``timer_id`` names the sleep within its execution."""

    code = "timer_parked"

    def __init__(self, timer_id: str, execution_id: str, wake_at: datetime) -> None:
        self.timer_id = timer_id
        self.execution_id = execution_id
        self.wake_at = wake_at
        super().__init__(
            f"execution {execution_id} is asleep until {wake_at.isoformat()} ({timer_id})"
        )


class ApprovalBlocked(JournalError):
    """A new execution was asked for while the session waits on an undecided approval."""

    code = "approval_blocked"


class ApprovalNotFound(NotFound):
    """No approval has this id in this conversation."""

    code = "approval_not_found"

    def __init__(self, approval_id: str) -> None:
        self.approval_id = approval_id
        super().__init__(f"approval {approval_id} not found")


class ApprovalConflict(JournalError):
    """The approval was already decided differently; decisions are final."""

    code = "approval_conflict"


class InvalidApproval(JournalError):
    """The approval cannot be decided here: it is inherited from a fork parent or superseded."""

    code = "invalid_approval"


class InvalidEditArgs(JournalError, ValueError):
    """An ``edit`` decision's arguments are missing or do not fit the parameters schema of
    the gated tool (as the approval request recorded it), or another decision carries some;
    nothing was written. ``field`` locates the first offending value, e.g. ``args.to``."""

    code = "invalid_edit_args"

    def __init__(self, message: str, *, field: str = "args") -> None:
        self.field = field
        super().__init__(message)


class InputNotFound(NotFound):
    """No input request has this id in this conversation."""

    code = "input_not_found"

    def __init__(self, input_id: str) -> None:
        self.input_id = input_id
        super().__init__(f"input {input_id} not found")


class InputConflict(JournalError):
    """The input was already answered differently; answers are final."""

    code = "input_conflict"


class InputClosed(JournalError):
    """The input can no longer be answered: its submission settled without an answer, a
    later execution superseded it, or it belongs to a fork parent."""

    code = "input_closed"


class InvalidAnswer(JournalError, ValueError):
    """An answer does not fit the JSON Schema its request recorded; nothing was written.
    ``field`` locates the first offending value, e.g. ``value.email``."""

    code = "invalid_answer"

    def __init__(self, message: str, *, field: str = "value") -> None:
        self.field = field
        super().__init__(message)


class HostOwnedOutcome(JournalError, ValueError):
    """A harness reported a tool outcome with a status only the host writes (``denied``, for
    a rejected approval; ``unknown``, for an outcome recovery could not establish)."""

    code = "host_owned_outcome"


class MissingIdempotencyKey(JournalError, ValueError):
    """A host-mediated tool call has no idempotency key; nothing was recorded."""

    code = "missing_idempotency_key"


class UnmediatedToolCall(JournalError, ValueError):
    """``turn.tool`` was given a tool the harness runs itself; use ``turn.report``."""

    code = "unmediated_tool_call"


class DuplicateCallId(JournalError, ValueError):
    """A call id was used twice in one execution."""

    code = "duplicate_call_id"


class MissingToolExecutor(JournalError):
    """A host tool must run, but the journal has no tool executor."""

    code = "missing_tool_executor"


class TurnClosed(JournalError):
    """The turn was used after its harness returned."""

    code = "turn_closed"


# --- integrations -----------------------------------------------------------------------


class UnsupportedConstruct(TetherError, ValueError):
    """An agent of a framework (pydantic-ai, LangGraph, the OpenAI Agents SDK) uses a
    construct whose effects or state a durable run cannot journal; raised when the agent is
    made durable, naming the construct. Each integration raises its own subclass, so one
    ``except`` catches them all.

    Example::

        try:
            durable(agent)
        except UnsupportedConstruct as exc:
            print(exc)  # which construct, and what to do instead
    """

    code = "unsupported_construct"


class NotJournaled(JournalError, RuntimeError):
    """Something a framework's run did cannot be kept by the journal (a value that is not
    JSON, a call made outside the journaled stand-ins, a realtime session): it fails the run
    rather than run unrecorded, which a resume or a replay would repeat. Each integration
    raises its own subclass.

    Example::

        except NotJournaled as exc:  # pydantic-ai's, LangGraph's alike
            print(exc.code)  # not_journaled
    """

    code = "not_journaled"


# --- engine ---------------------------------------------------------------------------


class TransientError(TetherError):
    """Raise (or subclass) this for a failure worth retrying later: the engine backs off,
    releases the submission with the error, and a later attempt tries again."""

    code = "transient"


class McpServerUnavailable(TransientError):
    """An MCP server could not be reached: its command would not start, or exited or
    answered nothing during the handshake, or its URL did not answer (``tether.tools.mcp``).
    ``server`` names it. Transient: the engine tries the run again later."""

    code = "mcp_server_unavailable"

    def __init__(self, message: str, *, server: str) -> None:
        self.server = server
        super().__init__(message)


class UnknownAgent(NotFound):
    """No agent of this name is registered on the runtime."""

    code = "unknown_agent"

    def __init__(self, agent: str) -> None:
        self.agent = agent
        super().__init__(f"no agent named {agent!r} is registered")


class UnknownVersion(TetherError, ValueError):
    """The runtime runs no version of that name of the agent (docs/versions.md)."""

    code = "unknown_version"


class InvalidDispatch(TetherError, ValueError):
    """A dispatched message is malformed; nothing was written. ``field`` names the culprit."""

    code = "invalid_dispatch"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class SessionBusy(TetherError):
    """The session is running a submission and the dispatch asked not to wait (``reject``)."""

    code = "session_busy"


class NoRunInFlight(TetherError):
    """A steer or follow-up found nothing running in the session; nothing was written."""

    code = "no_run_in_flight"


class RuntimeClosed(TetherError):
    """The runtime is closed (or not started)."""

    code = "runtime_closed"


class FailpointSpecInvalid(TetherError, ValueError):
    """``TETHER_FAILPOINTS`` (or a spec given to :func:`tether.testing.failpoints`) does not
    parse: ``entry`` is the entry at fault, ``reason`` what is wrong with it, ``spec`` the
    whole value. Raised when the runtime starts, before anything runs.

    Example::

        try:
            parse_failpoints("store.apend=error")
        except FailpointSpecInvalid as exc:
            exc.entry, exc.reason  # 'store.apend=error', "unknown failpoint 'store.apend' ..."
    """

    code = "failpoint_spec_invalid"

    def __init__(self, spec: str, entry: str, reason: str) -> None:
        self.spec = spec
        self.entry = entry.strip()
        self.reason = reason
        super().__init__(f"TETHER_FAILPOINTS entry {self.entry!r}: {reason}")


# --- models ---------------------------------------------------------------------------


class ModelError(TetherError):
    """A model provider failed; the subclass says what the engine should do about it."""

    code = "model_error"


class ModelTransientError(ModelError, TransientError):
    """Rate limits, overload, timeouts: back off and try again in a later attempt."""

    code = "model_transient"


class ModelFatalError(ModelError):
    """Bad credentials, a bad request, a refused prompt: retrying will not help."""

    code = "model_fatal"


class ContextOverflow(ModelError):
    """The request exceeded the model's context window: compact and retry the turn."""

    code = "context_overflow"


class ProviderError(ModelError):
    """A model provider's request failed: an HTTP error status, a connection that failed or
    dropped, a 5xx. ``status`` is the HTTP status it answered (``None``: it answered none),
    ``retry_after`` the seconds it asked to wait (``Retry-After``), ``retryable`` whether
    another try may succeed (not for a 4xx other than 408, 409 and 429: the request itself
    was refused), ``tries`` how many requests were made.

    Tether retries a model call that fails so within the call, under its
    :class:`~tether.models.ModelRetryPolicy`; the error that ends the retrying is not a
    :class:`TransientError` (the engine does not retry it again), and the submission settles
    with its ``code`` and :attr:`details` (``errorDetails`` on the settlement).

    Example::

        try:
            await model.request(request)
        except ProviderRateLimited as exc:
            exc.status, exc.retry_after   # 429, 1.0
    """

    code = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
        tries: int = 1,
    ) -> None:
        self.status = status
        self.retry_after = retry_after
        self.retryable = (
            retryable
            if retryable is not None
            else status is None or status in (408, 409, 429) or status >= 500
        )
        self.tries = tries
        super().__init__(message)

    @property
    def details(self) -> dict[str, Any]:
        """What a settlement records besides the code and message: the HTTP status (when the
        provider answered one) and the number of requests made."""
        status = {"status": self.status} if self.status is not None else {}
        return {**status, "tries": self.tries}

    def ended(self, tries: int, why: str) -> Self:
        """The same failure as the one that ends a model call after ``tries`` requests,
        ``why`` saying why no other is made."""
        return type(self)(
            f"{self}; {why}",
            status=self.status,
            retry_after=self.retry_after,
            retryable=self.retryable,
            tries=tries,
        )


class ProviderRateLimited(ProviderError):
    """The provider refused the request for a rate limit or a quota (HTTP 429): retried after
    the wait it asks for (``Retry-After``) while the retry budget lasts."""

    code = "provider_rate_limited"


class ProviderTimeout(ProviderError):
    """The provider sent nothing within the model call's timeout (before its answer began, or
    between two chunks of a streamed one), or answered 408."""

    code = "provider_timeout"
