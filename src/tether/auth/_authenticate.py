"""How a request becomes an :class:`~tether.auth.Identity`: the ``Authenticate`` hook an
application (or ``tether serve --auth``) gives the server, the bearer credential most of them
read, and the built-in static token.

A hook takes the request (its headers and cookies: the body is not read) and returns the
verified identity, ``None`` when the request carries no credential it knows (the server
answers 401 "a credential is required"), or raises :class:`~tether.errors.Unauthenticated`
saying what is wrong with the one it carries (expired, revoked, malformed: 401 with that
message). It may be a plain or an ``async`` function.
"""

from __future__ import annotations

import hmac
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias

from starlette.requests import HTTPConnection

from tether.auth._identity import ALL_SCOPES, Identity

__all__ = (
    "Authenticate",
    "StaticToken",
    "authenticate_credential",
    "authenticate_with",
    "bearer_token",
)

Authenticate: TypeAlias = Callable[[HTTPConnection], "Identity | Awaitable[Identity | None] | None"]
"""An authentication hook: the request's verified identity, or ``None`` (no credential).

Example, an existing session cookie of the application's own::

    async def authenticate(request: HTTPConnection) -> Identity | None:
        session = await my_sessions.get(request.cookies.get("my_session", ""))
        if session is None:
            return None
        return Identity(session.user_id, tenant=session.org_id, scopes=frozenset({"sessions:read"}))
"""


def bearer_token(request: HTTPConnection) -> str | None:
    """The credential of an ``Authorization: Bearer <token>`` header (the scheme is
    case-insensitive, RFC 9110 §11.1), or ``None`` if there is none."""
    scheme, _, token = request.headers.get("authorization", "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


async def authenticate_with(hook: Authenticate, request: HTTPConnection) -> Identity | None:
    """Call ``hook``, awaiting it if it is asynchronous; anything but an ``Identity`` or
    ``None`` is the application's mistake (``TypeError``)."""
    found = hook(request)
    if inspect.isawaitable(found):
        found = await found
    if found is not None and not isinstance(found, Identity):
        raise TypeError(f"an authenticate hook returns an Identity or None, not {found!r}")
    return found


async def authenticate_credential(hook: Authenticate, credential: str) -> Identity | None:
    """The identity ``hook`` gives a request carrying only ``credential`` as its bearer
    token: a credential that came another way (the console's sign-in form, its cookie)."""
    header = f"Bearer {credential}".encode("latin-1", "replace")
    request = HTTPConnection({"type": "http", "headers": [(b"authorization", header)]})
    return await authenticate_with(hook, request)


class StaticToken:
    """One shared bearer token, one identity holding every scope in every tenant: the
    ``--auth-token`` of a single team (compared in constant time).

    Example::

        app = create_app(runtime, authenticate=StaticToken("s3cret"))
    """

    def __init__(self, token: str, *, subject: str = "token") -> None:
        if not token.strip():
            raise ValueError("the token is empty: give a token, or serve without auth")
        self._token = token.strip().encode()
        self.identity = Identity(subject, tenant=None, scopes=frozenset(ALL_SCOPES))

    def matches(self, credential: str) -> bool:
        """Whether ``credential`` is the token."""
        return hmac.compare_digest(credential.encode("utf-8", "surrogateescape"), self._token)

    def __call__(self, request: HTTPConnection) -> Identity | None:
        token = bearer_token(request)
        return self.identity if token is not None and self.matches(token) else None
