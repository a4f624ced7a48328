"""The ASGI app (docs/architecture.md §7): every route, typed errors, ``/openapi.json``."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import FastAPI, Header, Query
from fastapi.responses import Response, StreamingResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

from tether.engine import MAX_APPROVALS_PAGE, InboundKind, Receipt, Runtime, SignalInfo
from tether.errors import ConversationNotFound
from tether.http._errors import ApiError, install_error_handlers, json_response
from tether.http._guard import Guard
from tether.http._progress import ProgressHub
from tether.http._sse import RecentRecords, View, session_stream
from tether.http._views import approval_item, submission_view
from tether.journal import Decision
from tether.records import AttachmentRef
from tether.store import MAX_SEQ, GateStatus, SessionKey

__all__ = ("create_app",)

MIB = 1024 * 1024


class _Body(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, validate_by_alias=True, extra="forbid"
    )


class DispatchBody(_Body):
    kind: InboundKind = "user"
    body: str = ""
    signal: SignalInfo | None = None
    attachments: list[AttachmentRef] | None = None
    result_schema: dict[str, JsonValue] | None = None
    result_retries: int | None = Field(default=None, ge=0, le=10)
    session: str = "default"
    dispatch_id: str | None = Field(default=None, min_length=1, max_length=200)


class MessageBody(_Body):
    body: str = Field(min_length=1)
    session: str = "default"


class SessionBody(_Body):
    session: str = "default"


class DecisionBody(_Body):
    decision: Decision
    reason: str | None = None
    args: dict[str, JsonValue] | None = None
    approver: str = Field(default="api", min_length=1, max_length=200)


class ForkBody(_Body):
    at_seq: int = Field(ge=1, le=MAX_SEQ)
    session: str | None = None


def create_app(
    runtime: Runtime,
    *,
    auth_token: str | None = None,
    heartbeat: float = 15.0,
    max_body: int = MIB,
    body_timeout: float = 60.0,
    manage_runtime: bool = False,
    worker: bool = True,
) -> FastAPI:
    """The HTTP face of a runtime. With ``manage_runtime`` the app starts and closes it.

    ``auth_token`` (non-empty) is required as ``Authorization: Bearer <token>`` on every
    route but the health checks; a request body must arrive within ``body_timeout``
    seconds (else 408) and weigh at most ``max_body`` bytes (else 413). ``/docs`` and
    ``/redoc`` serve their assets from this server: they work offline.

    Example::

        app = create_app(Runtime(demo_agents(), "sqlite:///./tether-data"), manage_runtime=True)
        # uvicorn.run(app, port=8484)
    """

    if auth_token is not None and not auth_token.strip():
        raise ValueError("auth_token is empty: give a token, or None to serve without auth")
    # Tool progress reaches the streams of this process's runs (it is never stored).
    progress = ProgressHub()
    runtime.instrumentation.observers.append(progress)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if manage_runtime:
            await runtime.start(worker=worker)
        try:
            yield
        finally:
            if manage_runtime:
                await runtime.close()

    # FastAPIOffline: the docs pages load Swagger UI and ReDoc from this server, not a CDN.
    app = FastAPIOffline(title="Tether", version="1", lifespan=lifespan)
    install_error_handlers(app)

    app.add_middleware(Guard, auth_token=auth_token, max_body=max_body, body_timeout=body_timeout)
    _routes(app, runtime, heartbeat, progress)
    return app


WAIT_TIMEOUT = Query(
    default=60.0,
    gt=0,
    le=3600,
    alias="timeout",
    description="Seconds ?wait may hold the request open.",
)


async def _wait(runtime: Runtime, submission_id: str, seconds: float) -> dict[str, Any] | None:
    """The settlement, or None when it takes longer than ``seconds`` (e.g. parked for a
    human): the caller then answers with where things stand instead of hanging."""
    try:
        async with asyncio.timeout(seconds):
            return await runtime.wait(submission_id)
    except TimeoutError:
        return None


def _receipt(receipt: Receipt) -> dict[str, Any]:
    return {"submissionId": receipt.submission_id, "conversationId": receipt.conversation_id}


_SEQ = re.compile(r"[0-9]{1,19}")  # ASCII digits only: str.isdigit() takes "¹" too


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


SEQ_AFTER = Query(default=0, ge=0, le=MAX_SEQ, description="Records after this seq.")


def _routes(app: FastAPI, runtime: Runtime, heartbeat: float, progress: ProgressHub) -> None:
    recent = RecentRecords(runtime)

    @app.post("/agents/{agent}/{instance}", status_code=202)
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
        base = {**_receipt(receipt), "session": receipt.session}
        if wait:
            if settled := await _wait(runtime, receipt.submission_id, wait_seconds):
                return json_response({**base, **settled}, 200)
            # Not settled in time: say where it stands (``waiting`` = parked for approval).
            info = await runtime.submission(receipt.submission_id)
            base["status"] = info.submission.status.value
        stream = f"/agents/{agent}/{instance}?session={receipt.session}"
        return json_response(
            {**base, "streamUrl": stream},
            202,
            {"Location": f"/submissions/{receipt.submission_id}"},
        )

    @app.get("/agents/{agent}/{instance}", response_model=None)
    async def stream(
        agent: str,
        instance: str,
        session: str = "default",
        after: int = SEQ_AFTER,
        follow: bool = False,
        view: View = "records",
        last_event_id: str | None = Header(default=None),
    ) -> StreamingResponse:
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

    @app.get("/agents/{agent}/{instance}/records")
    async def records(
        agent: str,
        instance: str,
        session: str = "default",
        after: int = SEQ_AFTER,
        limit: int = Query(default=100, ge=1, le=1000),
    ) -> Response:
        conversation = await runtime.conversation(agent, instance, session=session)
        page = await runtime.records(conversation.id, after=after, limit=limit)
        return json_response(
            {
                "conversationId": conversation.id,
                "records": [r.to_wire() for r in page],
                "next": page[-1].seq if page else after,
            }
        )

    @app.get("/agents/{agent}/{instance}/messages")
    async def messages(agent: str, instance: str, session: str = "default") -> Response:
        conversation = await runtime.conversation(agent, instance, session=session)
        view = runtime.view(conversation.id)
        await view.refresh(runtime.store, conversation.id)
        return json_response(
            {
                "conversationId": conversation.id,
                "messages": [m.to_json_object() for m in view.messages()],
            }
        )

    @app.post("/agents/{agent}/{instance}/steer")
    async def steer(agent: str, instance: str, payload: MessageBody) -> Response:
        receipt = await runtime.steer(agent, instance, payload.body, session=payload.session)
        return json_response(_receipt(receipt))

    @app.post("/agents/{agent}/{instance}/followup")
    async def follow_up(agent: str, instance: str, payload: MessageBody) -> Response:
        receipt = await runtime.follow_up(agent, instance, payload.body, session=payload.session)
        return json_response(_receipt(receipt))

    @app.post("/agents/{agent}/{instance}/abort")
    async def abort(agent: str, instance: str, payload: SessionBody | None = None) -> Response:
        session = payload.session if payload is not None else "default"
        return json_response({"aborted": await runtime.abort(agent, instance, session=session)})

    @app.post("/agents/{agent}/{instance}/compact", status_code=202)
    async def compact(agent: str, instance: str, payload: SessionBody | None = None) -> Response:
        session = payload.session if payload is not None else "default"
        receipt = await runtime.compact(agent, instance, session=session)
        return json_response(_receipt(receipt), 202)

    @app.get("/submissions/{submission_id}")
    async def submission(
        submission_id: str, wait: bool = False, wait_seconds: float = WAIT_TIMEOUT
    ) -> Response:
        if wait:
            await _wait(runtime, submission_id, wait_seconds)
        return json_response(submission_view(await runtime.submission(submission_id)))

    @app.get("/approvals")
    async def approvals(
        status: Literal["pending", "decided", "closed", "all"] = Query(
            default="pending",
            description="pending (waits for a decision), decided (the decisions made, the "
            "audit trail), closed (settled undecided) or all.",
        ),
        agent: str | None = Query(default=None, max_length=200),
        instance: str | None = Query(default=None, max_length=200),
        tool: str | None = Query(default=None, max_length=200),
        limit: int = Query(default=100, ge=1, le=MAX_APPROVALS_PAGE),
        cursor: str | None = Query(
            default=None, max_length=2000, description="A page's nextCursor: the page after it."
        ),
    ) -> Response:
        page = await runtime.approvals(
            status=None if status == "all" else GateStatus(status),
            agent=agent,
            instance=instance,
            tool=tool,
            limit=limit,
            cursor=cursor,
        )
        return json_response(
            {
                "approvals": [approval_item(gate) for gate in page.gates],
                "nextCursor": page.next_cursor,
            }
        )

    @app.post("/approvals/{approval_id}")
    async def decide(approval_id: str, payload: DecisionBody) -> Response:
        record = await runtime.approve(
            approval_id,
            payload.decision,
            approver=payload.approver,
            reason=payload.reason,
            args=payload.args,
        )
        return json_response({"approvalId": approval_id, "decision": record.to_wire()})

    @app.post("/conversations/{conversation_id}/fork", status_code=201)
    async def fork(conversation_id: str, payload: ForkBody) -> Response:
        child = await runtime.fork(conversation_id, at_seq=payload.at_seq, session=payload.session)
        key = child.key
        return json_response(
            {
                "conversationId": child.id,
                "agent": key.agent,
                "instance": key.instance,
                "session": key.session,
                "repairedCalls": child.repaired_calls,
            },
            201,
        )

    @app.get("/conversations/{conversation_id}/verify")
    async def verify(conversation_id: str) -> Response:
        count = await runtime.store.verify(conversation_id)
        return json_response({"conversationId": conversation_id, "ok": True, "records": count})

    @app.get("/healthz")
    async def healthz() -> Response:
        return json_response({"ok": True})

    @app.get("/readyz")
    async def readyz() -> Response:
        try:
            await runtime.ready()  # a write that commits: a full disk is not ready
        except Exception as exc:
            raise ApiError(503, "not_ready", f"the store cannot write: {exc}") from None
        return json_response({"ready": True})
