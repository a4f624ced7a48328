"""Controlling a session's run: steer it, queue a follow-up, abort it, compact its history."""

from __future__ import annotations

from fastapi import APIRouter

from tether.engine import Runtime
from tether.http._errors import BODY_FAILURES, Responses, failures
from tether.http._requests import MessageBody, SessionBody
from tether.http._responses import Aborted, SubmissionReceipt

__all__ = ("sessions_router",)

_CONTROL_FAILURES = failures(*BODY_FAILURES, 404, 409, 503)


def sessions_router(runtime: Runtime, *, responses: Responses) -> APIRouter:
    """Steer, follow up, abort, compact; ``responses`` are documented on each."""
    router = APIRouter(tags=["sessions"], responses=responses)

    @router.post("/agents/{agent}/{instance}/steer", responses=_CONTROL_FAILURES)
    async def steer(agent: str, instance: str, payload: MessageBody) -> SubmissionReceipt:
        """A message for the run in flight, which reads it at its next step (409
        ``no_run_in_flight`` when nothing runs)."""
        receipt = await runtime.steer(agent, instance, payload.body, session=payload.session)
        return SubmissionReceipt.of(receipt)

    @router.post("/agents/{agent}/{instance}/followup", responses=_CONTROL_FAILURES)
    async def follow_up(agent: str, instance: str, payload: MessageBody) -> SubmissionReceipt:
        """A message for the session once the run in flight has finished."""
        receipt = await runtime.follow_up(agent, instance, payload.body, session=payload.session)
        return SubmissionReceipt.of(receipt)

    @router.post("/agents/{agent}/{instance}/abort", responses=_CONTROL_FAILURES)
    async def abort(agent: str, instance: str, payload: SessionBody | None = None) -> Aborted:
        """Cancel everything of the session that has not settled."""
        session = payload.session if payload is not None else "default"
        return Aborted(aborted=await runtime.abort(agent, instance, session=session))

    @router.post("/agents/{agent}/{instance}/compact", status_code=202, responses=_CONTROL_FAILURES)
    async def compact(
        agent: str, instance: str, payload: SessionBody | None = None
    ) -> SubmissionReceipt:
        """Queue a compaction of the session's history."""
        session = payload.session if payload is not None else "default"
        return SubmissionReceipt.of(await runtime.compact(agent, instance, session=session))

    return router
