"""Chat clients' own requests, as thin adapters over a dispatch: ``POST .../ag-ui`` takes
AG-UI's ``RunAgentInput`` (what CopilotKit's and AG-UI's ``HttpAgent`` send) and ``POST
.../ai-sdk`` the body of the AI SDK's ``useChat`` default transport; each admits the last user
message to the session (``threadId``, or the chat's ``id``) and streams back that
submission's run in the protocol (docs/chat-protocols.md)."""

from __future__ import annotations

from typing import Any, Literal, cast

from fastapi import APIRouter, Header, Path
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from tether.auth import Scope
from tether.engine import Runtime
from tether.errors import ApprovalNotFound, ConversationNotFound
from tether.http._access import (
    Access,
    AccessDependency,
    actor_of,
    authorize_session,
    check_scope,
    own_session,
)
from tether.http._cursors import View
from tether.http._dependencies import RuntimeDependency, Streams, StreamsDependency
from tether.http._dispatch import event_stream
from tether.http._errors import BODY_FAILURES, ApiError, failures
from tether.http._sse import protocol_projector, session_stream
from tether.journal import Decision
from tether.records import ApprovalRequested, BudgetRequested, InputRequested, Record
from tether.store import MAX_SEQ, SessionKey, SubmissionStatus

__all__ = ("AgUiResumeEntry", "AgUiRunInput", "AiSdkChatRequest", "chat_protocols_router")

_STREAM = {
    "description": "Server-sent events: the submission's run in the protocol (``id: "
    "<seq>:<n>``, ``data``: an event), then the end of the stream once it settled or parked.",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


class _Open(BaseModel):
    """A body a client library writes: its other fields are kept, and ignored."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class AgUiResumeEntry(_Open):
    """An answer to an interrupt a run ended with: ``interruptId`` is the approval, input or
    budget gate id; ``payload`` the answer (an approval's: ``true``/``false``, or
    ``{"decision": "approve"|"reject"|"edit", "args": ..., "reason": ...}``; an input's:
    the value; a budget's: ``{"decision": ..., "extension": ...}``). ``cancelled`` rejects."""

    interrupt_id: str = Field(alias="interruptId", min_length=3, max_length=400)
    status: Literal["resolved", "cancelled"]
    payload: JsonValue = None


class AgUiRunInput(_Open):
    """AG-UI's ``RunAgentInput``: the thread is the session, the run id the dispatch id
    (a retried POST streams the same submission); the last user message is what is sent,
    unless ``resume`` answers the interrupts the thread's last run ended with.
    ``state``, ``tools``, ``context`` and ``forwardedProps`` are accepted and not used."""

    thread_id: str = Field(alias="threadId", min_length=1, max_length=200)
    run_id: str = Field(alias="runId", min_length=1, max_length=200)
    messages: list[dict[str, Any]] = Field(max_length=10_000)
    resume: list[AgUiResumeEntry] | None = Field(default=None, max_length=100)


class AiSdkChatRequest(_Open):
    """The body ``useChat``'s default transport posts: the chat ``id`` is the session; the
    last user message's text parts are what is sent."""

    id: str = Field(min_length=1, max_length=200)
    messages: list[dict[str, Any]] = Field(max_length=10_000)
    trigger: str | None = None


chat_protocols_router = APIRouter(tags=["sessions"])
"""The AG-UI and AI SDK chat adapters."""


def _last_user_text(messages: list[dict[str, Any]]) -> tuple[str, str | None]:
    """The text of the last user message (AG-UI's ``content``, a string or parts; the AI
    SDK's ``parts``), and its id."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        parts = message.get("parts") if content is None else content
        if isinstance(parts, str):
            text = parts
        elif isinstance(parts, list):
            text = "".join(
                str(part.get("text", ""))
                for part in parts
                if isinstance(part, dict) and part.get("type") == "text"
            )
        else:
            text = ""
        ident = message.get("id")
        if text:
            return text, ident if isinstance(ident, str) and ident else None
        break
    raise ApiError(422, "invalid_body", "messages must end with a user message that has text")


async def _reply(
    runtime: RuntimeDependency,
    access: AccessDependency,
    streams: StreamsDependency,
    agent: str,
    instance: str,
    session: str,
    text: str,
    dispatch_id: str | None,
    view: View,
    traceparent: str | None,
) -> StreamingResponse:
    identity = access.identity
    message: dict[str, Any] = {"body": text}
    if (by := actor_of(identity)) is not None:
        message["by"] = by
    await authorize_session(runtime, access, agent, instance, session)
    receipt = await runtime.dispatch(
        agent,
        instance,
        message,
        session=session,
        dispatch_id=dispatch_id,
        tenant=identity.tenant,
        trace={"traceparent": traceparent or "", "tracestate": ""},
    )
    frames = session_stream(
        runtime,
        streams.recent,
        SessionKey(agent, instance, session),
        receipt.conversation_id,
        after=0,
        follow=False,
        heartbeat=streams.heartbeat,
        view=view,
        sees=identity.sees,
        projector=protocol_projector(view, submission=receipt.submission_id),
    )
    return event_stream(frames, view)


@chat_protocols_router.post(
    "/agents/{agent}/{instance}/ag-ui",
    response_class=StreamingResponse,
    responses={200: _STREAM, **failures(*BODY_FAILURES, 404, 409, 503)},
)
async def ag_ui_run(
    runtime: RuntimeDependency,
    access: AccessDependency,
    streams: StreamsDependency,
    agent: str,
    instance: str,
    payload: AgUiRunInput,
    traceparent: str | None = Header(default=None),
) -> StreamingResponse:
    """Run the agent as AG-UI's ``HttpAgent`` asks: the thread's last user message is
    dispatched (idempotent by ``runId``), and its run streams back as AG-UI events, ending
    ``RUN_FINISHED`` / ``RUN_ERROR``, or ``RUN_FINISHED`` with an ``interrupt`` outcome when
    it parks for a person. A run input whose ``resume`` answers those interrupts decides
    them (as ``/approvals``, ``/inputs`` and ``/budgets`` do, with their scopes) and streams
    the run as it goes on from there."""
    if payload.resume:
        return await _resume(
            runtime,
            access,
            streams,
            agent,
            instance,
            payload.thread_id,
            payload.resume,
            "ag-ui",
        )
    text, _ = _last_user_text(payload.messages)
    return await _reply(
        runtime,
        access,
        streams,
        agent,
        instance,
        payload.thread_id,
        text,
        payload.run_id,
        "ag-ui",
        traceparent,
    )


_GATES: dict[str, Scope] = {
    ApprovalRequested.KIND: "approvals:decide",
    InputRequested.KIND: "inputs:answer",
    BudgetRequested.KIND: "approvals:decide",
}


async def _resume(
    runtime: Runtime,
    access: Access,
    streams: Streams,
    agent: str,
    instance: str,
    session: str,
    entries: list[AgUiResumeEntry],
    view: View,
) -> StreamingResponse:
    """Answer each interrupt, then stream the parked run from the first answer on."""
    identity = access.identity
    conversation = await own_session(runtime, access, agent, instance, session)
    answered: list[Record] = []
    for entry in entries:
        answered.append(await _answer(runtime, access, agent, conversation.id, entry))
    first = min(answered, key=lambda record: record.seq)
    projector = protocol_projector(view, submission=first.submission_id, since=first.seq - 1)
    frames = session_stream(
        runtime,
        streams.recent,
        SessionKey(agent, instance, session),
        conversation.id,
        after=0,
        follow=False,
        heartbeat=streams.heartbeat,
        view=view,
        sees=identity.sees,
        projector=projector,
    )
    return event_stream(frames, view)


def _approval_responses(messages: list[dict[str, Any]]) -> list[AgUiResumeEntry]:
    """The approvals ``useChat`` answered (``addToolApprovalResponse``): the tool parts of
    the last message, if it is the assistant's, in state ``approval-responded``."""
    if not messages or messages[-1].get("role") != "assistant":
        return []
    entries = []
    parts = messages[-1].get("parts")
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict) or part.get("state") != "approval-responded":
            continue
        approval = part.get("approval")
        if not isinstance(approval, dict) or not isinstance(approval.get("approved"), bool):
            raise ApiError(422, "invalid_body", "an approval response needs approved: a boolean")
        said = {"approved": approval["approved"], "reason": approval.get("reason")}
        entry = {"interruptId": approval.get("id"), "status": "resolved", "payload": said}
        try:
            entries.append(AgUiResumeEntry.model_validate(entry))
        except ValidationError:
            raise ApiError(422, "invalid_body", "an approval response needs its id") from None
    return entries


async def _answer(
    runtime: Runtime, access: Access, agent: str, conversation_id: str, entry: AgUiResumeEntry
) -> Record:
    """One interrupt answered, as its own route would: the record that answers it."""
    gate = entry.interrupt_id
    owner, dot, seq = gate.rpartition(".")
    missing = ApprovalNotFound(gate)
    if owner != conversation_id or not dot or not seq.isdigit() or not 0 < int(seq) <= MAX_SEQ:
        raise missing
    read = await runtime.records(conversation_id, after=int(seq) - 1, limit=1)
    if not read or read[0].seq != int(seq) or read[0].kind not in _GATES:
        raise missing
    asked = read[0]
    identity = access.identity
    check_scope(identity, _GATES[asked.kind], agent)
    by = actor_of(identity)
    name = identity.name if by is not None else "api"
    answer = entry.payload
    if asked.kind == InputRequested.KIND:
        if entry.status == "cancelled":
            raise ApiError(422, "invalid_body", "an input is answered, not cancelled")
        return await runtime.answer(gate, answer, responder=name, by=by)
    decision, fields = _decision(entry)
    if asked.kind == BudgetRequested.KIND:
        if decision == "edit":
            raise ApiError(422, "invalid_body", "a budget is approved or rejected")
        return await runtime.decide_budget(
            gate,
            "approve" if decision == "approve" else "reject",
            extension=_object(fields.get("extension"), "extension"),
            approver=name,
            reason=_text(fields.get("reason"), "reason"),
            by=by,
        )
    return await runtime.approve(
        gate,
        decision,
        approver=name,
        reason=_text(fields.get("reason"), "reason"),
        args=_object(fields.get("args"), "args"),
        by=by,
    )


def _decision(entry: AgUiResumeEntry) -> tuple[Decision, dict[str, JsonValue]]:
    """An approval's or a budget's decision as a resume entry says it."""
    answer = entry.payload
    if entry.status == "cancelled" or answer is False:
        return "reject", {}
    if answer is None or answer is True:
        return "approve", {}
    if not isinstance(answer, dict):
        raise ApiError(422, "invalid_body", "a decision is true, false or an object")
    said = answer.get("decision")
    if said is None and isinstance(answer.get("approved"), bool):
        said = "approve" if answer["approved"] else "reject"
    if said is None:
        said = "approve"
    if said not in ("approve", "reject", "edit"):
        raise ApiError(422, "invalid_body", "decision must be approve, reject or edit")
    return cast(Decision, said), answer


def _object(value: JsonValue, field: str) -> dict[str, JsonValue] | None:
    if value is None or isinstance(value, dict):
        return value
    raise ApiError(422, "invalid_body", f"{field} must be an object")


def _text(value: JsonValue, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ApiError(422, "invalid_body", f"{field} must be a string")


@chat_protocols_router.post(
    "/agents/{agent}/{instance}/ai-sdk",
    response_class=StreamingResponse,
    responses={200: _STREAM, **failures(*BODY_FAILURES, 404, 409, 503)},
)
async def ai_sdk_chat(
    runtime: RuntimeDependency,
    access: AccessDependency,
    streams: StreamsDependency,
    agent: str,
    instance: str,
    payload: AiSdkChatRequest,
    traceparent: str | None = Header(default=None),
) -> StreamingResponse:
    """Answer ``useChat``'s default transport: the chat's last user message is dispatched
    (idempotent by its message id, but for a ``regenerate-message``), and its submission
    streams back as the AI SDK's UI message stream (``x-vercel-ai-ui-message-stream: v1``,
    ending ``data: [DONE]``). A request whose last message is the assistant's, with tool
    approvals answered (``addToolApprovalResponse``), decides them instead and streams the
    run on."""
    if responses := _approval_responses(payload.messages):
        return await _resume(
            runtime, access, streams, agent, instance, payload.id, responses, "ai-sdk"
        )
    text, message_id = _last_user_text(payload.messages)
    dispatch_id = None if payload.trigger == "regenerate-message" else message_id
    return await _reply(
        runtime,
        access,
        streams,
        agent,
        instance,
        payload.id,
        text,
        dispatch_id,
        "ai-sdk",
        traceparent,
    )


@chat_protocols_router.get(
    "/agents/{agent}/{instance}/ai-sdk/{chat_id}/stream",
    response_class=StreamingResponse,
    responses={
        200: _STREAM,
        204: {"description": "The chat has no run going on."},
        **failures(404, 422, 503),
    },
)
async def ai_sdk_resume(
    runtime: RuntimeDependency,
    access: AccessDependency,
    streams: StreamsDependency,
    agent: str,
    instance: str,
    chat_id: str = Path(min_length=1, max_length=200),
) -> Response:
    """``useChat``'s ``resume``: the message of the chat's run going on (its oldest
    unsettled submission, not a scheduled one), from its start, as the AI SDK's UI message
    stream; 204 when there is none (or no such chat yet)."""
    identity = access.identity
    try:
        conversation = await own_session(runtime, access, agent, instance, chat_id)
    except ConversationNotFound:
        return Response(status_code=204)
    infos = await runtime.open_submissions(
        agent, instance, session=chat_id, tenant=identity.tenant, limit=20
    )
    going = [info for info in infos if info.status != SubmissionStatus.SCHEDULED]
    if not going:
        return Response(status_code=204)
    frames = session_stream(
        runtime,
        streams.recent,
        SessionKey(agent, instance, chat_id),
        conversation.id,
        after=0,
        follow=False,
        heartbeat=streams.heartbeat,
        view="ai-sdk",
        sees=identity.sees,
        projector=protocol_projector("ai-sdk", submission=going[0].submission.id),
    )
    return event_stream(frames, "ai-sdk")
