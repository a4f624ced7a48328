"""The console's sign-in (docs/console.md): ``POST /ui/login`` trades a credential for a
cookie, ``POST /ui/logout`` ends it.

A browser's ``EventSource`` cannot send an ``Authorization`` header, so the Guard also
accepts this cookie. With ``--auth-token`` it is a sign-in of its own (``_console_cookie``:
signed, with an issue time and a lifetime, revocable); with other authentication (stored
tokens, JWTs) it holds the credential the console signed in with, checked on every request
as the bearer token would be (a revoked or expired one ends the sign-in at once). Either is
``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site's page sends it) and
has a ``Max-Age``; the Guard also refuses any request that changes something when its
``Origin`` is another site's.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field

from tether.auth import authenticate_credential
from tether.errors import Unauthenticated
from tether.http._console_cookie import COOKIE, MAX_CREDENTIAL, request_cookie
from tether.http._dependencies import SignInDependency
from tether.http._errors import BODY_FAILURES, POST_FAILURES, ApiError, failures
from tether.http._responses import respond
from tether.wire import RequestBody, WireResponse

__all__ = ("LoginBody", "SignedIn", "console_auth_router")


class LoginBody(RequestBody):
    token: str = Field(min_length=1, max_length=MAX_CREDENTIAL)


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
    """Check the credential and set the console's session cookie (HttpOnly,
    SameSite=Strict, for the sign-in's lifetime), which the server accepts instead of
    ``Authorization: Bearer``: what a browser's ``EventSource`` needs. The shared token is
    compared in constant time; a stored token or a JWT is verified as a bearer token is
    (401 saying what is wrong with it). Without auth there is nothing to check and no
    cookie is set."""
    secret, cookies = sign_in.token, sign_in.cookies
    if sign_in.authenticate is not None:
        try:
            identity = await authenticate_credential(sign_in.authenticate, payload.token)
        except Unauthenticated as exc:
            raise ApiError(401, "unauthorized", str(exc)) from None
        if identity is None:
            raise ApiError(401, "unauthorized", "this server does not take that credential")
        value, left = payload.token, sign_in.lifetime
    elif secret is None or cookies is None:
        return respond(SignedIn(signed_in=True, auth_required=False))
    else:
        if not hmac.compare_digest(payload.token.encode(), secret):
            raise ApiError(401, "unauthorized", "that is not the server's token")
        # Signed in already (a reload, a stream renewing its cookie): the same sign-in, so
        # that signing out ends it, not only the newest of several.
        found = request_cookie(request.headers.get("cookie", ""))
        remaining = await cookies.seconds_left(found) if found is not None else None
        if found is None or remaining is None:
            value, left = cookies.issue(), cookies.lifetime
        else:
            value, left = found, remaining
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
    """Sign this browser out: its cookie is cleared (the page forgets its token too); with
    the shared token, the cookie is also revoked for good, on every server on this store (a
    copy replayed later is refused). A stored token or a JWT stays valid (it is the
    caller's, not the console's): revoke a stored one with ``tether tokens revoke``."""
    value = request_cookie(request.headers.get("cookie", ""))
    if value is not None and sign_in.cookies is not None:
        await sign_in.cookies.revoke(value)
    required = sign_in.token is not None or sign_in.authenticate is not None
    response = respond(SignedIn(signed_in=False, auth_required=required))
    response.delete_cookie(
        COOKIE,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response
