"""Rules beyond scopes: the ``Authorize`` hook an application gives the server
(``create_app(authorize=...)``, ``tether serve --authorize module:function``), asked on every
route that names a resource, after the route's scope and the tenant are checked, whether the
identity may do the route's action to that :class:`Resource` (docs/auth.md).

A hook returns ``True`` (allowed) or ``False`` (403 ``forbidden``, naming the action and the
resource's kind), or raises :class:`~tether.errors.Forbidden` with a message of its own. It
may be a plain or an ``async`` function.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from tether.auth._identity import Identity, Scope
from tether.errors import Forbidden
from tether.records import Actor

__all__ = ("Authorize", "Resource", "ResourceKind", "authorize_with")

ResourceKind = Literal["session", "submission", "approval", "input", "schedule"]
"""What a route acts on: a session (its conversation, or a fork of it), one submission, an
approval, an input, a schedule."""


@dataclass(frozen=True, slots=True)
class Resource:
    """What a request acts on, as an ``Authorize`` hook is shown it: its ``kind``, the
    session key it belongs to (``agent``, ``instance``, ``session``; a schedule's session, a
    submission's, a gate's), its ``tenant``, its ``id`` where it has one of its own (a
    submission's, an approval's, an input's, a schedule's, a conversation's for a session
    named by it), and its ``owner``: who created the session, as its ``conversation_created``
    record says (``None``: a session made by no authenticated request, one not created yet,
    a schedule).

    Example::

        def only_the_owner_steers(identity: Identity, action: Scope, resource: Resource) -> bool:
            if action in ("sessions:write", "sessions:abort", "sessions:erase"):
                return resource.owner is None or resource.owner.subject == identity.subject
            return True
    """

    kind: ResourceKind
    agent: str | None = None
    instance: str | None = None
    session: str | None = None
    tenant: str | None = None
    id: str | None = None
    owner: Actor | None = None


Authorize: TypeAlias = Callable[[Identity, Scope, Resource], "bool | Awaitable[bool]"]
"""An authorization hook: whether ``identity`` may do ``action`` (the route's scope) to the
``resource``; ``False`` is a 403. It may also raise :class:`~tether.errors.Forbidden`.

Example, only a session's owner changes it, anyone of its tenant reads it::

    async def authorize(identity: Identity, action: Scope, resource: Resource) -> bool:
        if action == "sessions:read" or resource.owner is None:
            return True
        return resource.owner.subject == identity.subject
"""


async def authorize_with(
    hook: Authorize, identity: Identity, action: Scope, resource: Resource
) -> None:
    """Ask ``hook``, awaiting it if it is asynchronous: :class:`~tether.errors.Forbidden`
    (naming the action and the resource's kind) unless it answers ``True``; anything but a
    ``bool`` is the application's mistake (``TypeError``)."""
    allowed = hook(identity, action, resource)
    if inspect.isawaitable(allowed):
        allowed = await allowed
    if not isinstance(allowed, bool):
        raise TypeError(f"an authorize hook returns True or False, not {allowed!r}")
    if not allowed:
        raise Forbidden(
            f"{identity.name!r} may not {action.partition(':')[2]} this {resource.kind}",
            action=action,
            resource=resource.kind,
        )
