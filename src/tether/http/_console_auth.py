"""The console's sign-in (docs/console.md): ``POST /ui/login`` trades the bearer token for a
cookie, ``POST /ui/logout`` clears it.

A browser's ``EventSource`` cannot send an ``Authorization`` header, so with
``--auth-token`` the Guard also accepts this cookie. It holds no secret of its own: its value
is an HMAC of a fixed label keyed by the token, so it is the same for every server started
with the token (a restarted server takes it at once) and it is no bearer token (it cannot be
replayed as one, and it does not reveal the token). It is ``HttpOnly`` (no script reads it)
and ``SameSite=Strict`` (no other site's page sends it); the Guard also refuses it on a
request that changes something when the request's ``Origin`` is another site's.
"""

from __future__ import annotations

import hashlib
import hmac

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field

from tether.http._errors import BODY_FAILURES, ApiError, failures
from tether.http._requests import _Body
from tether.http._responses import WireResponse, respond

__all__ = (
    "COOKIE",
    "LoginBody",
    "SignedIn",
    "console_auth_router",
    "cookie_value",
    "request_cookie",
)

COOKIE = "tether_console"
_LABEL = b"tether console session v1"


def cookie_value(token: bytes) -> bytes:
    """The cookie a browser signed in with ``token`` holds: an HMAC-SHA256 of a fixed label,
    keyed by the token (hex)."""
    return hmac.new(token, _LABEL, hashlib.sha256).hexdigest().encode()


def request_cookie(header: str) -> bytes | None:
    """The console cookie's value in a ``Cookie`` header, if there is one."""
    for pair in header.split(";"):
        name, equals, value = pair.strip().partition("=")
        if equals and name == COOKIE:
            return value.strip().strip('"').encode("latin-1")
    return None


class LoginBody(_Body):
    token: str = Field(min_length=1, max_length=4096)


class SignedIn(WireResponse):
    """Whether this browser is signed in to the console, and whether the server asks for a
    token at all (``authRequired``: it was started with ``--auth-token``)."""

    signed_in: bool
    auth_required: bool


def console_auth_router(auth_token: str | None) -> APIRouter:
    """``POST /ui/login`` and ``POST /ui/logout``; the Guard lets both through."""
    router = APIRouter(tags=["console"])
    token = auth_token.encode() if auth_token is not None else None
    required = token is not None

    @router.post(
        "/ui/login",
        response_model=SignedIn,
        responses=failures(*BODY_FAILURES, *((401,) if required else ())),
    )
    async def login(request: Request, payload: LoginBody) -> Response:
        """Check the token (in constant time) and set the console's session cookie (HttpOnly,
        SameSite=Strict), which the server accepts instead of ``Authorization: Bearer``:
        what a browser's ``EventSource`` needs. Without ``--auth-token`` there is nothing to
        check and no cookie is set."""
        if token is None:
            return respond(SignedIn(signed_in=True, auth_required=False))
        if not hmac.compare_digest(payload.token.encode(), token):
            raise ApiError(401, "unauthorized", "that is not the server's token")
        response = respond(SignedIn(signed_in=True, auth_required=True))
        response.set_cookie(
            COOKIE,
            cookie_value(token).decode(),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    @router.post("/ui/logout", response_model=SignedIn, responses=failures())
    async def logout(request: Request) -> Response:
        """Clear the console's session cookie (the page forgets its token too)."""
        response = respond(SignedIn(signed_in=False, auth_required=required))
        response.delete_cookie(
            COOKIE,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    return router
