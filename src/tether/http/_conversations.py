"""Reading a conversation and working on its log: a page of records, the transcript, a fork,
a verification of the hash chain."""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import Response

from tether.engine import Runtime
from tether.http._errors import BODY_FAILURES, Responses, failures
from tether.http._requests import SEQ_AFTER, ForkBody
from tether.http._responses import Forked, MessagesPage, RecordsPage, Verified, respond

__all__ = ("conversations_router",)


def conversations_router(runtime: Runtime, *, responses: Responses) -> APIRouter:
    """Records, messages, fork, verify; ``responses`` are documented on each."""
    router = APIRouter(tags=["conversations"], responses=responses)

    @router.get(
        "/agents/{agent}/{instance}/records",
        response_model=RecordsPage,
        responses=failures(404, 422, 503),
    )
    async def records(
        agent: str,
        instance: str,
        session: str = "default",
        after: int = SEQ_AFTER,
        limit: int = Query(default=100, ge=1, le=1000),
    ) -> Response:
        """A page of the session's records after ``after``; ``next`` is where the next
        page starts."""
        conversation = await runtime.conversation(agent, instance, session=session)
        page = await runtime.records(conversation.id, after=after, limit=limit)
        next_after = page[-1].seq if page else after
        return respond(RecordsPage(conversation_id=conversation.id, records=page, next=next_after))

    @router.get("/agents/{agent}/{instance}/messages", responses=failures(404, 422, 503))
    async def messages(agent: str, instance: str, session: str = "default") -> MessagesPage:
        """The session's transcript, as its model is given it."""
        conversation = await runtime.conversation(agent, instance, session=session)
        return MessagesPage(
            conversation_id=conversation.id, messages=await runtime.messages(conversation.id)
        )

    @router.post(
        "/conversations/{conversation_id}/fork",
        status_code=201,
        responses=failures(*BODY_FAILURES, 404, 409, 503),
    )
    async def fork(conversation_id: str, payload: ForkBody) -> Forked:
        """A new session whose log starts with this one's first ``atSeq`` records."""
        child = await runtime.fork(conversation_id, at_seq=payload.at_seq, session=payload.session)
        key = child.key
        return Forked(
            conversation_id=child.id,
            agent=key.agent,
            instance=key.instance,
            session=key.session,
            repaired_calls=child.repaired_calls,
        )

    @router.get("/conversations/{conversation_id}/verify", responses=failures(404, 409, 422, 503))
    async def verify(conversation_id: str) -> Verified:
        """Re-derive the conversation's whole hash chain (409 ``log_tampered`` if a record
        was altered)."""
        count = await runtime.verify(conversation_id)
        return Verified(conversation_id=conversation_id, ok=True, records=count)

    return router
