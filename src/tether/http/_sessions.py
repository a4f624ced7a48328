"""Sessions: list them; control a session's run (steer it, queue a follow-up, abort it,
compact its history); erase one."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Query, Request

from tether.engine import MAX_SESSIONS_PAGE, SessionState
from tether.errors import InvalidDispatch, InvalidMetadata
from tether.http._access import (
    AccessDependency,
    IdentityDependency,
    actor_of,
    authorize_session,
    listed_agent,
    own_session,
)
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import BODY_FAILURES, failures
from tether.http._responses import submission_receipt
from tether.http._session_views import erased_view, session_item
from tether.wire import (
    Aborted,
    ErasedView,
    MessageBody,
    MetadataPatch,
    MetadataView,
    SessionBody,
    SessionsPage,
    SubmissionReceipt,
)

__all__ = ("sessions_router",)

_CONTROL_FAILURES = failures(*BODY_FAILURES, 404, 409, 503)


sessions_router = APIRouter(tags=["sessions"])
"""List, steer, follow up, abort, compact, erase."""


@sessions_router.get("/sessions", responses=failures(422, 503))
async def sessions(
    request: Request,
    runtime: RuntimeDependency,
    identity: IdentityDependency,
    agent: str | None = Query(default=None, max_length=200),
    instance: str | None = Query(default=None, max_length=200, description="Needs agent."),
    status: SessionState | None = None,
    limit: int = Query(default=50, ge=1, le=MAX_SESSIONS_PAGE),
    cursor: str | None = Query(
        default=None, max_length=2000, description="A page's nextCursor: the page after it."
    ),
    usage: bool = Query(default=False, description="Total each session's model calls."),
    q: str | None = Query(
        default=None,
        max_length=1000,
        description="Full-text search: the sessions one of whose messages (a user's, a steer, "
        "an assistant's answer) holds every word of it, in any case (docs/search.md).",
    ),
    since: Annotated[
        datetime | None,
        Query(description="The sessions active at this time or later (RFC 3339, with an offset)."),
    ] = None,
) -> SessionsPage:
    """A page of sessions, newest activity first, with where each stands. Besides the
    parameters below, ``metadata.<key>=<value>`` (up to 8) keeps the sessions whose
    metadata holds the key with that value (a number or a boolean as its JSON: ``2``,
    ``true``)."""
    if instance is not None and agent is None:
        raise InvalidDispatch("an instance filter needs its agent", field="instance")
    if since is not None and since.tzinfo is None:
        raise InvalidDispatch("a time with an offset (RFC 3339)", field="since")
    page = await runtime.sessions(
        agent=listed_agent(identity, agent),
        instance=instance,
        status=status,
        limit=limit,
        cursor=cursor,
        usage=usage,
        tenant=identity.tenant,
        metadata=metadata_filters(request),
        text=q,
        since=since,
    )
    return SessionsPage(
        sessions=[session_item(info) for info in page.sessions],
        next_cursor=page.next_cursor,
    )


def metadata_filters(request: Request) -> dict[str, str]:
    """The ``metadata.<key>=<value>`` query parameters (a key given twice: ``InvalidMetadata``,
    as a filter out of bounds)."""
    filters: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name.startswith(_METADATA_PREFIX):
            key = name[len(_METADATA_PREFIX) :]
            if key in filters:
                raise InvalidMetadata("a metadata filter is given once", field=name)
            filters[key] = value
    return filters


_METADATA_PREFIX = "metadata."


@sessions_router.patch(
    "/agents/{agent}/{instance}/metadata", responses=failures(*BODY_FAILURES, 403, 404, 503)
)
async def patch_metadata(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    patch: Annotated[
        MetadataPatch,
        Body(
            description="An RFC 7396 merge patch: each key set to a string, a number or a "
            "boolean, or removed by ``null``.",
            media_type="application/merge-patch+json",
        ),
    ],
    session: str = Query(default="default", min_length=1, max_length=200),
) -> MetadataView:
    """Change a session's metadata by a merge patch (``Content-Type:
    application/merge-patch+json``, or ``application/json``) and answer what it leaves.
    At most 64 keys of 1..64 characters, 8 KiB serialized (422 ``invalid_metadata``,
    nothing changed); 404 for a session that has no conversation yet."""
    identity = access.identity
    await own_session(runtime, access, agent, instance, session)
    metadata = await runtime.patch_session_metadata(
        agent, instance, patch, session=session, tenant=identity.tenant
    )
    return MetadataView(agent=agent, instance=instance, session=session, metadata=metadata)


@sessions_router.delete("/agents/{agent}/{instance}", responses=failures(403, 404, 409, 422, 503))
async def erase(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    session: str = Query(default="default", min_length=1, max_length=200),
    force: bool = Query(
        default=False, description="Abort what is unsettled first, instead of a 409."
    ),
) -> ErasedView:
    """Erase a session for good: its log, submissions, snapshot, and the attachments no
    other log references (409 ``session_busy`` while something of it is unsettled)."""
    identity = access.identity
    await own_session(runtime, access, agent, instance, session)
    erased = await runtime.erase_session(
        agent, instance, session=session, force=force, by=actor_of(identity)
    )
    return erased_view(erased)


@sessions_router.post("/agents/{agent}/{instance}/steer", responses=_CONTROL_FAILURES)
async def steer(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    payload: MessageBody,
) -> SubmissionReceipt:
    """A message for the run in flight, which reads it at its next step (409
    ``no_run_in_flight`` when nothing runs)."""
    identity = access.identity
    await authorize_session(runtime, access, agent, instance, payload.session)
    message = {"body": payload.body, "by": actor_of(identity)}
    receipt = await runtime.steer(
        agent, instance, message, session=payload.session, tenant=identity.tenant
    )
    return submission_receipt(receipt)


@sessions_router.post("/agents/{agent}/{instance}/followup", responses=_CONTROL_FAILURES)
async def follow_up(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    payload: MessageBody,
) -> SubmissionReceipt:
    """A message for the session once the run in flight has finished."""
    identity = access.identity
    await authorize_session(runtime, access, agent, instance, payload.session)
    message = {"body": payload.body, "by": actor_of(identity)}
    receipt = await runtime.follow_up(
        agent, instance, message, session=payload.session, tenant=identity.tenant
    )
    return submission_receipt(receipt)


@sessions_router.post("/agents/{agent}/{instance}/abort", responses=_CONTROL_FAILURES)
async def abort(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    payload: SessionBody | None = None,
) -> Aborted:
    """Cancel everything of the session that has not settled."""
    identity = access.identity
    session = payload.session if payload is not None else "default"
    await authorize_session(runtime, access, agent, instance, session)
    aborted = await runtime.abort(
        agent, instance, session=session, tenant=identity.tenant, by=actor_of(identity)
    )
    return Aborted(aborted=aborted)


@sessions_router.post(
    "/agents/{agent}/{instance}/compact", status_code=202, responses=_CONTROL_FAILURES
)
async def compact(
    runtime: RuntimeDependency,
    access: AccessDependency,
    agent: str,
    instance: str,
    payload: SessionBody | None = None,
) -> SubmissionReceipt:
    """Queue a compaction of the session's history."""
    identity = access.identity
    session = payload.session if payload is not None else "default"
    await authorize_session(runtime, access, agent, instance, session)
    receipt = await runtime.compact(agent, instance, session=session, tenant=identity.tenant)
    return submission_receipt(receipt)
