"""``/submissions/{id}``: where a submission stands (optionally once it settles), an
operator's abort, and its subagent tree; and a session's unsettled submissions."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query
from pydantic import JsonValue

from tether.engine import Runtime
from tether.http._access import AccessDependency, actor_of, own_session, own_submission
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import POST_FAILURES, failures
from tether.http._requests import WAIT_TIMEOUT
from tether.http._submission_views import submission_tree_node, submission_view
from tether.store import SubmissionStatus
from tether.wire import OpenSubmissions, SubmissionTreeNode, SubmissionView

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


submissions_router = APIRouter(tags=["submissions"])
"""A submission's view, abort and tree; a session's open submissions."""

MAX_OPEN_SUBMISSIONS = 200
"""The most ``GET /agents/{agent}/{instance}/submissions`` lists."""


@submissions_router.get("/agents/{agent}/{instance}/submissions", responses=failures(404, 422, 503))
async def open_submissions(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    session: str = Query(default="default", max_length=200),
    limit: int = Query(default=50, ge=1, le=MAX_OPEN_SUBMISSIONS),
) -> OpenSubmissions:
    """The session's unsettled submissions, oldest first (the first ``limit``): each as
    ``GET /submissions/{id}`` shows it, so a scheduled one with its ``dueAt``, a queued
    one held back by a limit with ``waitReason: "limit"``, and each one's ``priority``
    (404 before the session's first message)."""
    await own_session(runtime, access, agent, instance, session)
    infos = await runtime.open_submissions(
        agent, instance, session=session, tenant=access.identity.tenant, limit=limit + 1
    )
    return OpenSubmissions(
        submissions=[submission_view(info) for info in infos[:limit]],
        more=len(infos) > limit,
    )


@submissions_router.get("/submissions/{submission_id}", responses=failures(404, 422, 503))
async def submission(
    runtime: RuntimeDependency,
    access: AccessDependency,
    submission_id: str,
    wait: bool = False,
    wait_seconds: float = WAIT_TIMEOUT,
) -> SubmissionView:
    """A submission's status, attempts and settlement, the submission that spawned it
    (a subagent's) and the children its task calls spawned; with ``?wait=true``, once
    it has settled or ``timeout`` seconds have passed, whichever comes first."""
    info = await own_submission(runtime, access, submission_id)
    if wait and info.status is not SubmissionStatus.SETTLED:
        await settled_within(runtime, submission_id, wait_seconds)
        info = await runtime.submission(submission_id)
    return submission_view(info)


@submissions_router.post(
    "/submissions/{submission_id}/abort",
    responses=failures(*POST_FAILURES, 404, 422, 503),
)
async def abort(
    runtime: RuntimeDependency, access: AccessDependency, submission_id: str
) -> SubmissionView:
    """Abort one submission (an operator's cancel), wherever it runs: it settles
    ``aborted`` at its next safe point (``cancelRequestedAt`` says the abort took). A
    subagent's parent gets an error result for its task and goes on; the submission's
    own children are cancelled with it. A settled submission is answered as it is."""
    await own_submission(runtime, access, submission_id)
    aborted = await runtime.abort_submission(submission_id, by=actor_of(access.identity))
    return submission_view(aborted)


@submissions_router.get("/submissions/{submission_id}/tree", responses=failures(404, 422, 503))
async def tree(
    runtime: RuntimeDependency, access: AccessDependency, submission_id: str
) -> SubmissionTreeNode:
    """The submission's subagent tree: every child its task calls spawned, theirs in
    turn, each with its status and usage (model calls, tokens, cost)."""
    await own_submission(runtime, access, submission_id)
    return submission_tree_node(await runtime.tree(submission_id))
