"""A session's way in and out: ``POST /agents/{agent}/{instance}`` admits a message,
``GET /agents/{agent}/{instance}`` streams the session's records (SSE, ``_sse``)."""

from __future__ import annotations

import re
from typing import Literal

from fastapi import APIRouter, Header
from fastapi.responses import Response, StreamingResponse

from tether.engine import Runtime
from tether.errors import ConversationNotFound
from tether.http._errors import BODY_FAILURES, ApiError, Responses, failures
from tether.http._progress import ProgressHub
from tether.http._requests import SEQ_AFTER, WAIT_TIMEOUT, DispatchBody
from tether.http._responses import DispatchAccepted, DispatchSettled, respond
from tether.http._sse import RecentRecords, View, session_stream
from tether.http._submissions import settled_within
from tether.store import MAX_SEQ, SessionKey

__all__ = ("dispatch_router",)

_SEQ = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() takes "¹" too

_EVENT_STREAM = {
    "description": "Server-sent events. Each record is ``id: <seq>``, ``event: <kind>``, "
    "``data: <the record's JSON>`` (``view=stream``: ``id: <seq>:<n>``, ``event: <type>``, "
    "``data: <a stream event>``). Tool progress comes as ``event: progress`` without an "
    "``id``; a ``: heartbeat`` comment while nothing happens. Reconnect with "
    "``Last-Event-ID`` to resume after the last event received.",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


def _number(text: str) -> int | None:
    """A record position written in ASCII digits, within what a store can hold."""
    if not _SEQ.fullmatch(text):
        return None
    value = int(text)
    return value if value <= MAX_SEQ else None


def _resume_point(after: int, last_event_id: str | None, view: View) -> tuple[int, int]:
    """Where a stream starts: (records to skip, events of the next record already sent).

    ``Last-Event-ID`` is a seq (records view) or ``<seq>:<n>`` (stream view: the n-th event
    of record seq, so the record is projected again and its first n + 1 events dropped).
    The later of it and ``?after`` wins.
    """
    if last_event_id is None:
        return after, 0
    text, colon, index = last_event_id.strip().partition(":")
    seq, n = _number(text), _number(index)
    if view == "records" and not colon and seq is not None:
        return max(after, seq), 0
    if view == "stream" and colon and seq is not None and n is not None and seq > 0:
        return (seq - 1, n + 1) if seq > after else (after, 0)
    shape = "a record seq" if view == "records" else "<seq>:<n> as sent"
    raise ApiError(400, "invalid_last_event_id", f"Last-Event-ID must be {shape}")


def dispatch_router(
    runtime: Runtime, *, heartbeat: float, progress: ProgressHub, responses: Responses
) -> APIRouter:
    """Admission and the SSE stream of a session; ``responses`` are documented on both."""
    router = APIRouter(tags=["sessions"], responses=responses)
    recent = RecentRecords(runtime)

    @router.post(
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
        message = payload.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude={"session", "dispatch_id"}
        )
        receipt = await runtime.dispatch(
            agent,
            instance,
            message,
            session=payload.session,
            dispatch_id=payload.dispatch_id or idempotency_key,
            multitask=multitask,
            # The caller's trace, joined by every attempt (malformed ones are ignored).
            trace={"traceparent": traceparent or "", "tracestate": tracestate or ""},
        )
        status = None
        if wait:
            if settled := await settled_within(runtime, receipt.submission_id, wait_seconds):
                return respond(DispatchSettled.of(receipt, settled))
            # Not settled in time: say where it stands (``waiting`` = parked for approval).
            status = (await runtime.submission(receipt.submission_id)).status
        accepted = DispatchAccepted.of(receipt, agent, instance, status)
        return respond(accepted, 202, Location=f"/submissions/{receipt.submission_id}")

    @router.get(
        "/agents/{agent}/{instance}",
        response_class=StreamingResponse,
        responses={200: _EVENT_STREAM, **failures(400, 404, 422, 503)},
    )
    async def stream(
        agent: str,
        instance: str,
        session: str = "default",
        after: int = SEQ_AFTER,
        follow: bool = False,
        view: View = "records",
        last_event_id: str | None = Header(default=None),
    ) -> StreamingResponse:
        """The session's records after ``after`` (or ``Last-Event-ID``), as SSE; it ends
        once the session is at rest, unless ``?follow=true`` (then it is awaited if it does
        not exist yet). ``view=stream`` sends canonical stream events instead."""
        conversation_id: str | None = None
        try:
            conversation_id = (await runtime.conversation(agent, instance, session=session)).id
        except ConversationNotFound:
            if not follow:
                raise
        start, skip = _resume_point(after, last_event_id, view)
        frames = session_stream(
            runtime,
            recent,
            SessionKey(agent, instance, session),
            conversation_id,
            after=start,
            follow=follow,
            heartbeat=heartbeat,
            view=view,
            skip=skip,
            progress=progress,
        )
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(frames, media_type="text/event-stream", headers=headers)

    return router
