"""The console's sign-in (docs/console.md): ``POST /ui/login`` trades the bearer token for a
cookie, ``POST /ui/logout`` revokes it.

A browser's ``EventSource`` cannot send an ``Authorization`` header, so with
``--auth-token`` the Guard also accepts this cookie (``_console_cookie``: signed, with an
issue time and a lifetime, revocable). It is ``HttpOnly`` (no script reads it),
``SameSite=Strict`` (no other site's page sends it) and has a ``Max-Age``; the Guard also
refuses any request that changes something when its ``Origin`` is another site's.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field

from tether.http._console_cookie import COOKIE, request_cookie
from tether.http._dependencies import SignInDependency
from tether.http._errors import BODY_FAILURES, POST_FAILURES, ApiError, failures
from tether.http._requests import RequestBody
from tether.http._responses import WireResponse, respond

__all__ = ("LoginBody", "SignedIn", "console_auth_router")


class LoginBody(RequestBody):
    token: str = Field(min_length=1, max_length=4096)


class SignedIn(WireResponse):
    """Whether this browser is signed in to the console, and whether the server asks for a
    token at all (``authRequired``: it was started with ``--auth-token``)."""

    signed_in: bool
    auth_required: bool


console_auth_router = APIRouter(tags=["console"])
"""``POST /ui/login`` and ``POST /ui/logout``; the Guard lets both through without a
token. The app's sign-in issues and revokes the cookie when the server has a token (and
``create_app`` then documents the login's 401)."""


@console_auth_router.post(
    "/ui/login",
    response_model=SignedIn,
    responses=failures(*BODY_FAILURES, 421),
)
async def login(sign_in: SignInDependency, request: Request, payload: LoginBody) -> Response:
    """Check the token (in constant time) and set the console's session cookie (HttpOnly,
    SameSite=Strict, for the sign-in's lifetime), which the server accepts instead of
    ``Authorization: Bearer``: what a browser's ``EventSource`` needs. Without
    ``--auth-token`` there is nothing to check and no cookie is set."""
    secret, cookies = sign_in.token, sign_in.cookies
    if secret is None or cookies is None:
        return respond(SignedIn(signed_in=True, auth_required=False))
    if not hmac.compare_digest(payload.token.encode(), secret):
        raise ApiError(401, "unauthorized", "that is not the server's token")
    # Signed in already (a reload, a stream renewing its cookie): the same sign-in, so
    # that signing out ends it, not only the newest of several.
    value = request_cookie(request.headers.get("cookie", ""))
    left = await cookies.seconds_left(value) if value is not None else None
    if value is None or left is None:
        value, left = cookies.issue(), cookies.lifetime
    response = respond(SignedIn(signed_in=True, auth_required=True))
    response.set_cookie(
        COOKIE,
        value,
        max_age=int(left),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@console_auth_router.post(
    "/ui/logout", response_model=SignedIn, responses=failures(*POST_FAILURES, 421)
)
async def logout(sign_in: SignInDependency, request: Request) -> Response:
    """Sign this browser out: its cookie is revoked for good, on every server on this
    store (a copy replayed later is refused), and cleared (the page forgets its token
    too)."""
    value = request_cookie(request.headers.get("cookie", ""))
    if value is not None and sign_in.cookies is not None:
        await sign_in.cookies.revoke(value)
    response = respond(SignedIn(signed_in=False, auth_required=sign_in.token is not None))
    response.delete_cookie(
        COOKIE,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response
