"""A session's way in and out: ``POST /agents/{agent}/{instance}`` admits a message,
``GET /agents/{agent}/{instance}`` streams the session's records (SSE, ``_sse``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final, Literal

from fastapi import APIRouter, Header
from fastapi.responses import Response, StreamingResponse

from tether._failpoints import ARMED
from tether.errors import ConversationNotFound
from tether.http._access import (
    AccessDependency,
    actor_of,
    authorize_session,
    own_session,
)
from tether.http._cursors import family_cursor, resume_point
from tether.http._dependencies import RuntimeDependency, StreamsDependency
from tether.http._errors import BODY_FAILURES, ApiError, failures
from tether.http._requests import SEQ_AFTER, WAIT_TIMEOUT
from tether.http._responses import dispatch_accepted, dispatch_settled, respond
from tether.http._sse import View, failpoint_frames, session_stream
from tether.http._submissions import settled_within
from tether.store import SessionKey
from tether.wire import DispatchAccepted, DispatchBody, DispatchSettled

__all__ = ("AI_SDK_HEADER", "PROTOCOL_VIEWS", "dispatch_router", "event_stream")

PROTOCOL_VIEWS: Final = frozenset({"ag-ui", "ai-sdk"})
AI_SDK_HEADER: Final = "x-vercel-ai-ui-message-stream"

_EVENT_STREAM = {
    "description": "Server-sent events. Each record is ``id: <seq>``, ``event: <kind>``, "
    "``data: <the record's JSON>`` (``view=stream``: ``id: <seq>:<n>``, ``event: <type>``, "
    "``data: <a stream event>``). Tool progress comes as ``event: progress`` without an "
    "``id``; a ``: heartbeat`` comment line while nothing happens. The reconnection time "
    "comes as a field of the first event (``retry: 2000``), not a frame of its own, and no "
    "blank line ends anything but an event: clients that dispatch at every blank line, "
    "agentex's SSE client among them, see only events. Reconnect with "
    "``Last-Event-ID`` to resume after the last event received. With ``children=true`` "
    "the events of the subagents its task calls spawned come too, as ``event: child`` "
    "(``data``: the child's ids, and its ``record``, or in the stream view its ``event``), "
    "between the call's ``task_spawned`` and its outcome; an ``id`` then also holds each "
    "open child's position (``<seq>;<path>=<seq>``, stream view ``<seq>:<n>;<path>=<seq>:<n>``). "
    "``view=ag-ui`` and ``view=ai-sdk`` send the AG-UI protocol's events and the Vercel AI "
    "SDK's UI message stream parts instead (``id: <seq>:<n>``, ``data`` alone, no progress; "
    "the AI SDK's ends with ``data: [DONE]``): docs/chat-protocols.md.",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


dispatch_router = APIRouter(tags=["sessions"])
"""Admission and the SSE stream of a session."""


@dispatch_router.post(
    "/agents/{agent}/{instance}",
    status_code=202,
    response_model=None,
    responses={
        202: {
            "model": DispatchAccepted,
            "description": "Admitted (with ``?wait``: not settled within ``timeout``).",
            "headers": {
                "Location": {
                    "description": "The submission: ``/submissions/<id>``.",
                    "schema": {"type": "string"},
                }
            },
        },
        200: {"model": DispatchSettled, "description": "Settled, with ``?wait=true``."},
        **failures(*BODY_FAILURES, 404, 409, 503),
    },
)
async def dispatch(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    payload: DispatchBody,
    wait: bool = False,
    wait_seconds: float = WAIT_TIMEOUT,
    multitask: Literal["enqueue", "reject", "interrupt", "steer"] = "enqueue",
    idempotency_key: str | None = Header(default=None, max_length=200),
    traceparent: str | None = Header(default=None),
    tracestate: str | None = Header(default=None),
) -> Response:
    """Admit a message to the session; ``?wait=true`` answers with its settlement."""
    identity = access.identity
    message = payload.model_dump(
        mode="json",
        by_alias=True,
        exclude_none=True,
        exclude={
            "session",
            "dispatch_id",
            "run_at",
            "after_seconds",
            "priority",
            "callback",
            "metadata",
        },
    )
    if (by := actor_of(identity)) is not None:  # who sent it, recorded on the message
        message["by"] = by
    await authorize_session(runtime, access, agent, instance, payload.session)
    receipt = await runtime.dispatch(
        agent,
        instance,
        message,
        session=payload.session,
        dispatch_id=payload.dispatch_id or idempotency_key,
        multitask=multitask,
        tenant=identity.tenant,
        priority=payload.priority,
        # The caller's trace, joined by every attempt (malformed ones are ignored).
        trace={"traceparent": traceparent or "", "tracestate": tracestate or ""},
        run_at=payload.run_at,
        after=payload.after_seconds,
        callback=None if payload.callback is None else payload.callback.model_dump(),
        metadata=payload.metadata,
    )
    status = None
    if wait:
        if settled := await settled_within(runtime, receipt.submission_id, wait_seconds):
            return respond(dispatch_settled(receipt, settled))
        # Not settled in time: say where it stands (``waiting`` = parked for approval).
        status = (await runtime.submission(receipt.submission_id)).status
    accepted = dispatch_accepted(receipt, agent, instance, status)
    return respond(accepted, 202, Location=f"/submissions/{receipt.submission_id}")


@dispatch_router.get(
    "/agents/{agent}/{instance}",
    response_class=StreamingResponse,
    responses={200: _EVENT_STREAM, **failures(400, 404, 422, 503)},
)
async def stream(
    runtime: RuntimeDependency,
    access: AccessDependency,
    streams: StreamsDependency,
    agent: str,
    instance: str,
    session: str = "default",
    after: int = SEQ_AFTER,
    follow: bool = False,
    view: View = "records",
    children: bool = False,
    last_event_id: str | None = Header(default=None),
) -> StreamingResponse:
    """The session's records after ``after`` (or ``Last-Event-ID``), as SSE; it ends
    once the session is at rest, unless ``?follow=true`` (then it is awaited if it does
    not exist yet). ``view=stream`` sends canonical stream events instead, ``view=ag-ui``
    AG-UI events, ``view=ai-sdk`` the AI SDK's UI message stream.
    ``children=true`` sends the subagents' events too, each under its task call, and
    ends once they are at rest as well (not in the protocol views)."""
    identity = access.identity
    if children and view in PROTOCOL_VIEWS:
        raise ApiError(
            400, "invalid_view", f"view={view} does not take children=true: stream each child"
        )
    conversation_id: str | None = None
    try:
        conversation_id = (await own_session(runtime, access, agent, instance, session)).id
    except ConversationNotFound:
        if not follow:
            raise
        await authorize_session(runtime, access, agent, instance, session)
    cursor = None
    if children:
        cursor, start, skip = family_cursor(last_event_id, view), after, 0
    else:
        start, skip = resume_point(after, last_event_id, view)
    frames = session_stream(
        runtime,
        streams.recent,
        SessionKey(agent, instance, session),
        conversation_id,
        after=start,
        follow=follow,
        heartbeat=streams.heartbeat,
        view=view,
        skip=skip,
        progress=runtime.progress,
        children=children,
        cursor=cursor,
        sees=identity.sees,
    )
    if ARMED:  # failpoint sse.send (docs/testing.md)
        frames = failpoint_frames(frames, sleep=runtime.clock.sleep)
    return event_stream(frames, view)


def event_stream(frames: AsyncIterator[bytes], view: View) -> StreamingResponse:
    """An SSE response (the AI SDK's, with the header its clients look for)."""
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    if view == "ai-sdk":
        headers[AI_SDK_HEADER] = "v1"
    return StreamingResponse(frames, media_type="text/event-stream", headers=headers)
