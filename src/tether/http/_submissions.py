"""``GET /submissions/{id}``: where a submission stands, optionally once it settles."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from pydantic import JsonValue

from tether.engine import Runtime
from tether.http._errors import Responses, failures
from tether.http._requests import WAIT_TIMEOUT
from tether.http._responses import SubmissionView

__all__ = ("settled_within", "submissions_router")


async def settled_within(
    runtime: Runtime, submission_id: str, seconds: float
) -> dict[str, JsonValue] | None:
    """The settlement, or None when it takes longer than ``seconds`` (e.g. parked for a
    human): the caller then answers with where things stand instead of hanging."""
    try:
        async with asyncio.timeout(seconds):
            return await runtime.wait(submission_id)
    except TimeoutError:
        return None


def submissions_router(runtime: Runtime, *, responses: Responses) -> APIRouter:
    """A submission's view; ``responses`` are documented on it."""
    router = APIRouter(tags=["submissions"], responses=responses)

    @router.get("/submissions/{submission_id}", responses=failures(404, 422, 503))
    async def submission(
        submission_id: str, wait: bool = False, wait_seconds: float = WAIT_TIMEOUT
    ) -> SubmissionView:
        """A submission's status, attempts and settlement; with ``?wait=true``, once it has
        settled or ``timeout`` seconds have passed, whichever comes first."""
        if wait:
            await settled_within(runtime, submission_id, wait_seconds)
        return SubmissionView.of(await runtime.submission(submission_id))

    return router
