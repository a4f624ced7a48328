"""Reading a conversation and working on its log: a page of records, the transcript, a fork,
a verification of the hash chain, an export of the whole log."""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import Response, StreamingResponse

from tether.http._access import (
    AccessDependency,
    actor_of,
    own_conversation,
    own_session,
)
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, failures
from tether.http._requests import SEQ_AFTER
from tether.http._responses import respond
from tether.records import Record
from tether.store import EXPORT_PAGE, export_chunks
from tether.wire import ForkBody, Forked, MessagesPage, RecordsPage, Verified

__all__ = ("conversations_router",)

_NDJSON = {
    "description": "The conversation's log as stored, one record a line: each record's "
    "canonical JSON with its ``prevHash`` and ``hash`` (what ``tether records`` prints), so "
    "the file verifies on its own; then a last line, the trailer (``tetherExport``: the "
    "record count, the first and head seqs, the head hash, signed with the server's export "
    "key if it has one), which ``tether import`` requires. ``tether replay --from`` replays "
    "it. Streamed page by page: a long log is never held whole.",
    "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
}


conversations_router = APIRouter(tags=["conversations"])
"""Records, messages, fork, verify."""


@conversations_router.get(
    "/agents/{agent}/{instance}/records",
    response_model=RecordsPage,
    responses=failures(404, 422, 503),
)
async def records(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    session: str = "default",
    after: int = SEQ_AFTER,
    limit: int = Query(default=100, ge=1, le=1000),
) -> Response:
    """A page of the session's records after ``after``; ``next`` is where the next
    page starts."""
    conversation = await own_session(runtime, access, agent, instance, session)
    page = await runtime.records(conversation.id, after=after, limit=limit)
    next_after = page[-1].seq if page else after
    return respond(RecordsPage(conversation_id=conversation.id, records=page, next=next_after))


@conversations_router.get("/agents/{agent}/{instance}/messages", responses=failures(404, 422, 503))
async def messages(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    session: str = "default",
) -> MessagesPage:
    """The session's transcript, as its model is given it."""
    conversation = await own_session(runtime, access, agent, instance, session)
    return MessagesPage(
        conversation_id=conversation.id, messages=await runtime.messages(conversation.id)
    )


@conversations_router.post(
    "/conversations/{conversation_id}/fork",
    status_code=201,
    responses=failures(*BODY_FAILURES, 404, 409, 410, 503),
)
async def fork(
    runtime: RuntimeDependency,
    access: AccessDependency,
    conversation_id: str,
    payload: ForkBody,
) -> Forked:
    """A new session whose log starts with this one's first ``atSeq`` records (410
    ``seq_truncated`` for a seq retention removed); it belongs to the same tenant, and its
    ``conversation_created`` records who made it (the request's identity)."""
    identity = access.identity
    await own_conversation(runtime, access, conversation_id)
    child = await runtime.fork(
        conversation_id, at_seq=payload.at_seq, session=payload.session, by=actor_of(identity)
    )
    key = child.key
    return Forked(
        conversation_id=child.id,
        agent=key.agent,
        instance=key.instance,
        session=key.session,
        repaired_calls=child.repaired_calls,
    )


@conversations_router.get(
    "/conversations/{conversation_id}/verify", responses=failures(404, 409, 422, 503)
)
async def verify(
    runtime: RuntimeDependency, access: AccessDependency, conversation_id: str
) -> Verified:
    """Re-derive the conversation's whole hash chain (409 ``log_tampered`` if a record
    was altered)."""
    await own_conversation(runtime, access, conversation_id)
    head = await runtime.verify(conversation_id)
    first = await runtime.records(conversation_id, limit=1)
    first_seq = first[0].seq if first else 1
    return Verified(conversation_id=conversation_id, ok=True, records=head, first_seq=first_seq)


@conversations_router.get(
    "/conversations/{conversation_id}/export",
    response_class=StreamingResponse,
    responses={200: _NDJSON, **failures(404, 422, 503)},
)
async def export(
    runtime: RuntimeDependency, access: AccessDependency, conversation_id: str
) -> StreamingResponse:
    """The whole log as JSON lines (``application/x-ndjson``), the records exactly as the
    store holds them, then the export's trailer."""
    await own_conversation(runtime, access, conversation_id)

    async def read(after: int, limit: int) -> list[Record]:
        return await runtime.records(conversation_id, after=after, limit=limit)

    first = await read(0, EXPORT_PAGE)  # 404 before 200
    chunks = export_chunks(read, conversation_id, key=runtime.config.export_key, first_page=first)
    return StreamingResponse(chunks, media_type="application/x-ndjson")
