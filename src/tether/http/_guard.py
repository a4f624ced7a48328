"""Checks every request passes before it reaches a route (the site it comes from: its
``Host`` and ``Origin``; auth: the bearer token, or the console's cookie; body size and time,
content type), ``X-Content-Type-Options: nosniff`` on every response whatever produced it,
HEAD, and the last word on unexpected exceptions.

A plain ASGI middleware rather than Starlette's ``BaseHTTPMiddleware``: that one
re-buffers streaming responses, and SSE streams must go out frame by frame.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import HTTPException
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether._sites import SitePolicy
from tether.auth import Authenticate, Identity, authenticate_credential, authenticate_with
from tether.errors import TetherError, Unauthenticated
from tether.http._access import OPEN
from tether.http._console_cookie import MAX_CREDENTIAL, ConsoleCookies, request_cookie
from tether.http._errors import error_response, internal_error_response, status_of

__all__ = ("Guard",)

_HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
_OPEN_PATHS = _HEALTH_PATHS | {"/", "/ui"}
_CONSOLE_PREFIX = "/ui/"  # the console's page, its files and its sign-in: no secrets there
_CHANGING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_PATCH_TYPES = frozenset({"application/json", "application/merge-patch+json"})
_NOSNIFF = (b"x-content-type-options", b"nosniff")
_SHOWN = 200  # characters of a refused Host or Origin the answer repeats
logger = logging.getLogger("tether.http")


class _HeadAnswered(Exception):
    """A HEAD request's headers are out: the app producing the GET body can stop."""


class Guard:
    """Answer 421/403/401/408/413/415 in the error envelope: a ``Host`` the server does not
    answer to, a change sent from another site's page (``sites``), no valid credential (the
    ``authenticate`` hook finds the request's identity, else the console's cookie does; the
    identity is left in the scope's ``state`` for the routes to ask), a POST
    that does not say ``application/json``; cap bodies whether sized or chunked and bound
    the time they take to arrive; answer HEAD wherever GET is answered; and give an
    unexpected exception, wherever it is raised, the JSON envelope (500 ``internal``) and
    one line with its traceback in the log."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        authenticate: Authenticate | None,
        max_body: int,
        body_timeout: float = 60.0,
        open_paths: frozenset[str] = frozenset(),
        sites: SitePolicy | None = None,
        cookies: ConsoleCookies | None = None,
    ) -> None:
        self.app = app
        self.open_paths = _OPEN_PATHS | open_paths
        """Paths no credential guards: the health checks, the console's page, and routes
        that authenticate themselves (a webhook's signature)."""
        self.any_host_paths = _HEALTH_PATHS | open_paths
        """Paths answered whatever the ``Host``: nothing there is for a rebound page (the
        health checks say nothing, a webhook takes only what its sender signed)."""
        self.sites = sites if sites is not None else SitePolicy.of()
        self.authenticate = authenticate
        self.cookies = cookies
        self.max_body = max_body
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        head = scope["method"] == "HEAD"
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", ()), _NOSNIFF]
            elif head and message["type"] == "http.response.body":
                # The server sends no body for HEAD; end it here rather than let a GET
                # route produce one (a followed stream never would end).
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                if message.get("more_body", False):
                    raise _HeadAnswered
                return
            await send(message)

        if head:  # answered as the GET would be, minus the body
            scope = {**scope, "method": "GET"}
        try:
            refusal = self._refusal(scope, headers)
            if refusal is None and self._guarded(scope["path"]):
                refusal = await self._identify(scope, headers)
            if refusal is None and scope["method"] in _BODY_METHODS:
                refusal = self._body_refusal(scope["method"], headers)
            if refusal is not None:
                await refusal(scope, receive, guarded_send)
                return
            await self._forward(scope, receive, guarded_send)
        except _HeadAnswered:
            return
        except Exception:
            if started:  # too late for an answer: the server logs it and cuts the response
                raise
            logger.exception("%s %s failed", scope["method"], scope["path"])
            await internal_error_response()(scope, receive, guarded_send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> Any:
        """A request from a site that may not use the server: a rebound name, another
        site's page changing something."""
        host = headers.get("host")
        if (
            host is not None
            and not self.sites.serves(host, scope.get("server"))
            and scope["path"] not in self.any_host_paths
        ):
            return error_response(
                421,
                "misdirected_request",
                f"this server does not answer to Host {host[:_SHOWN]!r}; if that is its "
                "name, start it with --allowed-host (create_app(allowed_hosts=...))",
            )
        origin = headers.get("origin")
        if (
            origin is not None
            and scope["method"] in _CHANGING_METHODS
            and not self.sites.trusts(origin, host)
        ):
            return error_response(
                403,
                "forbidden_origin",
                f"a page of {origin[:_SHOWN]!r} may not change anything here; if it is "
                "yours, start the server with --allowed-origin (create_app(allowed_origins=...))",
            )
        return None

    def _guarded(self, path: str) -> bool:
        """Whether the path asks for a credential."""
        return path not in self.open_paths and not path.startswith(_CONSOLE_PREFIX)

    async def _identify(self, scope: Scope, headers: dict[str, str]) -> Any:
        """Leave the request's identity in the scope's state (:data:`OPEN` on a server
        without auth), or return the 401: no credential, or a bad one (the message says
        what is wrong with it). A store that cannot answer is a 503, as at any route."""
        identity: Identity | None = OPEN
        try:
            if self.authenticate is not None:
                identity = await authenticate_with(self.authenticate, HTTPConnection(scope))
                if identity is None:
                    identity = await self._cookie_identity(headers)
        except Unauthenticated as exc:
            return error_response(401, exc.code, str(exc))
        except TetherError as exc:
            return error_response(status_of(exc), exc.code, str(exc))
        if identity is None:
            return error_response(
                401, "unauthorized", "a bearer token (or the console's sign-in) is required"
            )
        scope.setdefault("state", {})["identity"] = identity
        return None

    async def _cookie_identity(self, headers: dict[str, str]) -> Identity | None:
        """The identity of the console's cookie: with the shared token, one issued here,
        not expired, not signed out (a read of the store); with other authentication, the
        credential the console signed in with, verified as the bearer token would be."""
        cookie = request_cookie(headers.get("cookie", ""))
        if cookie is None:
            return None
        if self.cookies is not None:
            return await self.cookies.identity(cookie)
        if self.authenticate is None or len(cookie) > MAX_CREDENTIAL:
            return None
        return await authenticate_credential(self.authenticate, cookie)

    def _body_refusal(self, method: str, headers: dict[str, str]) -> Any:
        length = headers.get("content-length")
        if length is not None and (
            not (length.isascii() and length.isdigit()) or int(length) > self.max_body
        ):
            return self._too_large()
        # Every POST says JSON, a bodiless one too: no page of another site can send that
        # without a CORS preflight (which this server never answers), unlike a form's types
        # or a no-cors fetch's none. A PATCH (a merge patch) says JSON too, or RFC 7396's
        # own type. (No route takes PUT: it answers 405.)
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if method == "POST" and media_type != "application/json":
            return error_response(
                415,
                "unsupported_media_type",
                "send Content-Type: application/json (a POST without a body too)",
            )
        if method == "PATCH" and media_type not in _PATCH_TYPES:
            return error_response(
                415,
                "unsupported_media_type",
                "send Content-Type: application/merge-patch+json or application/json",
            )
        return None

    def _too_large(self) -> Any:
        return error_response(413, "payload_too_large", f"the body is over {self.max_body} bytes")

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        received = 0
        body_done = scope["method"] not in _BODY_METHODS
        deadline: float | None = None

        async def counted_receive() -> Message:
            nonlocal received, body_done, deadline
            if body_done:  # e.g. a stream listening for the client to go away: no bound
                return await receive()
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + self.body_timeout
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise HTTPException(
                    408,
                    f"the body did not arrive within {self.body_timeout:g} s",
                    headers={"Connection": "close"},
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    # Chunked bodies carry no Content-Length; stop reading at the cap.
                    raise HTTPException(413, f"the body is over {self.max_body} bytes")
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        await self.app(scope, counted_receive, send)
