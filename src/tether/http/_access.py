"""Who may call which route: the scope each API route needs (docs/auth.md), the
dependency that asks the request's identity for it, and the application's ``authorize``
hook asked about the resource a route names.

The Guard authenticates every request and leaves its :class:`~tether.auth.Identity` in the
ASGI scope's state; ``create_app`` gives each API route the dependency of its scope from
``ROUTE_SCOPES``, so one table says what every route needs (``tests/http/test_access.py``
pins that it names every route, and nothing else). A route naming a resource finds it
through one of the ``own_*`` helpers (``authorize_session`` where the runtime checks the
tenant itself), which check the tenant, then ask the ``authorize`` hook, if the app has
one, whether the identity may do the route's action (its scope) to it.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Final

from fastapi import Depends
from pydantic import BaseModel
from starlette.requests import HTTPConnection

from tether.auth import (
    ALL_SCOPES,
    Authorize,
    Identity,
    Resource,
    ResourceKind,
    Scope,
    authorize_with,
)
from tether.engine import Runtime, SubmissionInfo
from tether.errors import (
    ConversationNotFound,
    Forbidden,
    InputNotFound,
    InvalidDispatch,
    SubmissionNotFound,
)
from tether.records import Actor
from tether.store import Conversation

__all__ = (
    "OPEN",
    "ROUTE_SCOPES",
    "Access",
    "AccessDependency",
    "IdentityDependency",
    "access_dependency",
    "actor_of",
    "authorize_session",
    "check_scope",
    "check_tenant",
    "identity_dependency",
    "identity_of",
    "listed_agent",
    "own_conversation",
    "own_gate",
    "own_session",
    "own_submission",
    "requires",
    "shown_name",
)

OPEN: Final = Identity("anonymous", tenant=None, scopes=frozenset(ALL_SCOPES))
"""Every request's identity on a server started without auth: every scope, every tenant."""

ROUTE_SCOPES: Final[Mapping[tuple[str, str], Scope | None]] = {
    ("GET", "/me"): None,
    ("GET", "/agents"): "sessions:read",
    ("GET", "/sessions"): "sessions:read",
    ("POST", "/agents/{agent}/{instance}"): "sessions:write",
    ("GET", "/agents/{agent}/{instance}"): "sessions:read",
    ("DELETE", "/agents/{agent}/{instance}"): "sessions:erase",
    ("PATCH", "/agents/{agent}/{instance}/metadata"): "sessions:write",
    ("POST", "/agents/{agent}/{instance}/steer"): "sessions:write",
    ("POST", "/agents/{agent}/{instance}/followup"): "sessions:write",
    ("POST", "/agents/{agent}/{instance}/abort"): "sessions:abort",
    ("POST", "/agents/{agent}/{instance}/compact"): "sessions:write",
    ("POST", "/agents/{agent}/{instance}/ag-ui"): "sessions:write",
    ("POST", "/agents/{agent}/{instance}/ai-sdk"): "sessions:write",
    ("GET", "/agents/{agent}/{instance}/ai-sdk/{chat_id}/stream"): "sessions:read",
    ("GET", "/agents/{agent}/{instance}/records"): "sessions:read",
    ("GET", "/agents/{agent}/{instance}/messages"): "sessions:read",
    ("GET", "/agents/{agent}/{instance}/conversation"): "sessions:read",
    ("POST", "/conversations/{conversation_id}/fork"): "sessions:fork",
    ("GET", "/conversations/{conversation_id}/verify"): "sessions:read",
    ("GET", "/conversations/{conversation_id}/export"): "sessions:read",
    ("GET", "/conversations/{conversation_id}/spans"): "sessions:read",
    ("GET", "/conversations/{conversation_id}/usage"): "sessions:read",
    ("GET", "/submissions/{submission_id}"): "sessions:read",
    ("GET", "/agents/{agent}/{instance}/submissions"): "sessions:read",
    ("POST", "/submissions/{submission_id}/abort"): "sessions:abort",
    ("GET", "/submissions/{submission_id}/tree"): "sessions:read",
    ("GET", "/approvals"): "approvals:read",
    ("POST", "/approvals/{approval_id}"): "approvals:decide",
    ("GET", "/inputs"): "sessions:read",
    ("GET", "/budgets"): "approvals:read",
    ("POST", "/budgets/{gate_id}"): "approvals:decide",
    ("POST", "/inputs/{input_id}"): "inputs:answer",
    ("GET", "/schedules"): "sessions:read",
    ("POST", "/schedules"): "schedules:write",
    ("DELETE", "/schedules/{schedule_id}"): "schedules:write",
    ("GET", "/versions"): "admin",
    ("POST", "/versions/upgrade"): "admin",
    ("GET", "/metrics"): "metrics:read",
    ("GET", "/usage"): "sessions:read",
    ("GET", "/webhook-deliveries"): "sessions:read",
    ("GET", "/webhook-deliveries/{delivery_id}"): "sessions:read",
    ("POST", "/webhook-deliveries/{delivery_id}/resend"): "sessions:write",
}
"""The scope each API route needs, by method and path (``None``: any identity). Reading
what belongs to no tenant
(the workers and the versions they serve) and acting on every tenant's runs at once (an
upgrade) is ``admin``'s alone."""


def identity_of(request: HTTPConnection) -> Identity:
    """The identity the Guard found for the request (:data:`OPEN` on a server without
    auth, or for a route mounted on an app without the Guard)."""
    identity: Identity | None = request.scope.get("state", {}).get("identity")
    return OPEN if identity is None else identity


async def identity_dependency(request: HTTPConnection) -> Identity:
    """The request's identity, for a route that acts on its behalf (a coroutine: FastAPI
    runs a plain function's dependency in its thread pool)."""
    return identity_of(request)


IdentityDependency = Annotated[Identity, Depends(identity_dependency)]


def actor_of(identity: Identity) -> Actor | None:
    """Who the journal records as putting something in: the verified identity, or no one
    on a server without auth."""
    return None if identity is OPEN else identity.actor()


def shown_name(body: BaseModel, field: str, identity: Identity, by: Actor | None) -> str:
    """The name a decision or an answer is shown under: the body's ``field`` if the client
    gave one, else the verified identity's name (a server without auth: the field's
    default)."""
    given: str = getattr(body, field)
    return given if field in body.model_fields_set or by is None else identity.name


def check_tenant(identity: Identity, tenant: str | None, missing: Exception) -> None:
    """Raise ``missing`` (the resource's own not-found error) unless ``identity`` sees a
    resource of ``tenant``: to another tenant, it does not exist (404, not 403)."""
    if not identity.sees(tenant):
        raise missing


@dataclass(frozen=True, slots=True)
class Access:
    """A request's identity with what the app's ``authorize`` hook (if any) is asked about
    the resource its route names: the route's ``action`` (its scope)."""

    identity: Identity
    authorize: Authorize | None = None
    action: Scope | None = None

    async def check(self, resource: Callable[[], Awaitable[Resource]]) -> None:
        """Ask the hook about the resource ``resource`` builds (only if there is a hook:
        without one nothing is read); ``Forbidden`` if it refuses."""
        if self.authorize is None or self.action is None:
            return
        await authorize_with(self.authorize, self.identity, self.action, await resource())


async def access_dependency(request: HTTPConnection) -> Access:
    """The request's :class:`Access`: its identity, the app's ``authorize`` hook and the
    action of the matched route (its scope in ``ROUTE_SCOPES``)."""
    identity = identity_of(request)
    state = getattr(request.app.state, "tether", None)
    hook: Authorize | None = getattr(state, "authorize", None)
    if hook is None:
        return Access(identity)
    route = request.scope.get("route")
    methods = getattr(route, "methods", None) or {"GET"}
    method = "GET" if "GET" in methods else next(iter(methods))
    return Access(identity, hook, ROUTE_SCOPES.get((method, getattr(route, "path", ""))))


AccessDependency = Annotated[Access, Depends(access_dependency)]


async def _resource(
    runtime: Runtime, kind: ResourceKind, conversation: Conversation, resource_id: str
) -> Resource:
    """What the ``authorize`` hook is shown of a resource of ``conversation``'s session,
    its owner read from the session's log."""
    key = conversation.key
    return Resource(
        kind,
        key.agent,
        key.instance,
        key.session,
        conversation.tenant,
        resource_id,
        await runtime.created_by(conversation),
    )


def _session_resource(
    runtime: Runtime, conversation: Conversation
) -> Callable[[], Awaitable[Resource]]:
    return functools.partial(_resource, runtime, "session", conversation, conversation.id)


async def own_conversation(runtime: Runtime, access: Access, conversation_id: str) -> Conversation:
    """The conversation, if ``access``'s identity sees it (``ConversationNotFound``
    otherwise) and the app's ``authorize`` hook lets it do the route's action to it."""
    conversation = await runtime.conversation_by_id(conversation_id)
    check_tenant(access.identity, conversation.tenant, ConversationNotFound(conversation_id))
    await access.check(_session_resource(runtime, conversation))
    return conversation


async def own_session(
    runtime: Runtime, access: Access, agent: str, instance: str, session: str
) -> Conversation:
    """The conversation of a session, if ``access``'s identity sees it
    (``ConversationNotFound`` otherwise) and the ``authorize`` hook lets it do the route's
    action to it."""
    conversation = await runtime.conversation(agent, instance, session=session)
    check_tenant(access.identity, conversation.tenant, ConversationNotFound(str(conversation.key)))
    await access.check(_session_resource(runtime, conversation))
    return conversation


async def authorize_session(
    runtime: Runtime, access: Access, agent: str, instance: str, session: str
) -> None:
    """Ask the ``authorize`` hook (if the app has one: else nothing is read) about the
    session, for a route whose runtime operation checks the tenant itself (a message, a
    steer, an abort...). A session not created yet is shown with no owner and no id, as the
    tenant it would be created for (the runtime's ``tenant_of`` map's, else the identity's);
    another tenant's is ``ConversationNotFound``."""
    if access.authorize is None:
        return
    try:
        conversation = await runtime.conversation(agent, instance, session=session)
    except ConversationNotFound:
        mapping = runtime.config.tenant_of
        mapped = None if mapping is None else mapping(agent, instance)
        tenant = access.identity.tenant if mapped is None else mapped

        async def new() -> Resource:
            return Resource("session", agent, instance, session, tenant)

        await access.check(new)
        return
    check_tenant(access.identity, conversation.tenant, ConversationNotFound(str(conversation.key)))
    await access.check(_session_resource(runtime, conversation))


async def own_submission(runtime: Runtime, access: Access, submission_id: str) -> SubmissionInfo:
    """The submission, if ``access``'s identity sees it (``SubmissionNotFound`` otherwise)
    and the ``authorize`` hook lets it do the route's action to it (its owner is its
    session's)."""
    info = await runtime.submission(submission_id)
    submission = info.submission
    check_tenant(access.identity, submission.tenant, SubmissionNotFound(submission_id))

    async def resource() -> Resource:
        conversation = await runtime.conversation_by_id(submission.conversation_id)
        return await _resource(runtime, "submission", conversation, submission_id)

    await access.check(resource)
    return info


async def own_gate(runtime: Runtime, access: Access, gate_id: str, missing: Exception) -> None:
    """Raise ``missing`` unless ``access``'s identity sees the conversation of the gate (an
    approval's or an input's id is ``{conversation id}.{seq}``; an operator's is not looked
    up, unless the ``authorize`` hook is asked: about the gate, of kind ``approval`` or
    ``input`` as ``missing`` says)."""
    identity = access.identity
    if identity.tenant is None and access.authorize is None:
        return
    conversation_id, dot, _ = gate_id.rpartition(".")
    if not dot:
        raise missing
    try:
        conversation = await runtime.conversation_by_id(conversation_id)
    except ConversationNotFound:
        raise missing from None
    check_tenant(identity, conversation.tenant, missing)

    kind: ResourceKind = "input" if isinstance(missing, InputNotFound) else "approval"
    await access.check(functools.partial(_resource, runtime, kind, conversation, gate_id))


def listed_agent(identity: Identity, agent: str | None) -> str | None:
    """The agent a listing of ``identity`` is filtered by: the one asked for (403 if the
    identity may not use it), else, for an identity of one agent, that one. An identity of
    several agents lists them one at a time (422 without ``agent``): a listing's pages come
    from one index each."""
    if identity.agents is None:
        return agent
    if agent is not None:
        if not identity.may_use(agent):
            raise Forbidden(f"{identity.name!r} may not use the agent {agent!r}")
        return agent
    if len(identity.agents) == 1:
        [only] = identity.agents
        return only
    raise InvalidDispatch(
        f"{identity.name!r} may use several agents: list one at a time (?agent=)",
        field="agent",
    )


def check_scope(identity: Identity, scope: Scope, agent: str | None = None) -> None:
    """:class:`~tether.errors.Forbidden` naming what ``identity`` lacks, unless it holds
    ``scope`` and (given an ``agent``) may use that agent."""
    if not identity.allows(scope):
        raise Forbidden(f"{identity.name!r} lacks the scope {scope!r} this needs", scope=scope)
    if agent is not None and not identity.may_use(agent):
        raise Forbidden(f"{identity.name!r} may not use the agent {agent!r}")


def requires(scope: Scope) -> Callable[[HTTPConnection], Awaitable[Identity]]:
    """A route dependency: the request's identity if it holds ``scope`` (and, on a route
    naming an ``{agent}``, may use that agent), else :class:`~tether.errors.Forbidden`
    naming what it lacks (403).

    Example::

        @router.get("/approvals", dependencies=[Depends(requires("approvals:read"))])
    """

    async def identity_holding(request: HTTPConnection) -> Identity:
        identity = identity_of(request)
        check_scope(identity, scope, request.path_params.get("agent"))
        return identity

    identity_holding.__name__ = f"requires_{scope.replace(':', '_')}"
    return identity_holding
