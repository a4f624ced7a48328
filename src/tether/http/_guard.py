"""Checks every request passes before it reaches a route (auth: the bearer token, or the
console's cookie; body size and time, content type), ``X-Content-Type-Options: nosniff`` on
every response whatever produced it, HEAD, and the last word on unexpected exceptions.

A plain ASGI middleware rather than Starlette's ``BaseHTTPMiddleware``: that one
re-buffers streaming responses, and SSE streams must go out frame by frame.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.http._console_auth import cookie_value, request_cookie
from tether.http._errors import error_response, internal_error_response

__all__ = ("Guard",)

_OPEN_PATHS = frozenset({"/healthz", "/readyz", "/", "/ui"})
_CONSOLE_PREFIX = "/ui/"  # the console's page, its files and its sign-in: no secrets there
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_NOSNIFF = (b"x-content-type-options", b"nosniff")
logger = logging.getLogger("tether.http")


class _HeadAnswered(Exception):
    """A HEAD request's headers are out: the app producing the GET body can stop."""


class Guard:
    """Answer 401/408/413/415 in the error envelope (a request is authenticated by
    ``Authorization: Bearer <token>`` or by the console's cookie, see ``_console_auth``);
    cap bodies whether sized or chunked and bound the time they take to arrive; answer HEAD
    wherever GET is answered; and give an unexpected exception, wherever it is raised, the
    JSON envelope (500 ``internal``) and one line with its traceback in the log."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        auth_token: str | None,
        max_body: int,
        body_timeout: float = 60.0,
        open_paths: frozenset[str] = frozenset(),
    ) -> None:
        if auth_token is not None and not auth_token.strip():
            raise ValueError("auth_token is empty: give a token, or None for no auth")
        self.app = app
        self.open_paths = _OPEN_PATHS | open_paths
        """Paths the token does not guard: the health checks, the console's page, and
        routes that authenticate themselves (a webhook's signature)."""
        self.token = auth_token.encode() if auth_token is not None else None
        self.cookie = cookie_value(self.token) if self.token is not None else None
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
        path = scope["path"]
        if (
            self.token is not None
            and path not in self.open_paths
            and not path.startswith(_CONSOLE_PREFIX)
            and not self._authenticated(scope["method"], headers)
        ):
            return error_response(
                401, "unauthorized", "a bearer token (or the console's sign-in) is required"
            )
        if scope["method"] not in _BODY_METHODS:
            return None
        length = headers.get("content-length")
        if length is not None and (
            not (length.isascii() and length.isdigit()) or int(length) > self.max_body
        ):
            return self._too_large()
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if length != "0" and media_type not in ("application/json", ""):
            return error_response(415, "unsupported_media_type", "send application/json")
        return None

    def _authenticated(self, method: str, headers: dict[str, str]) -> bool:
        """The bearer token, or the console's cookie; both compared in constant time."""
        assert self.token is not None and self.cookie is not None
        # The scheme is case-insensitive (RFC 9110 §11.1).
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(
            token.strip().encode("latin-1"), self.token
        ):
            return True
        cookie = request_cookie(headers.get("cookie", ""))
        if cookie is None or not hmac.compare_digest(cookie, self.cookie):
            return False
        # SameSite=Strict keeps other sites' pages from sending the cookie; a request that
        # changes something must also not come from another origin, whatever the browser.
        return method in _SAFE_METHODS or _same_origin(headers)

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


def _same_origin(headers: dict[str, str]) -> bool:
    """No ``Origin`` (not a cross-site browser request), or one naming this very host."""
    origin = headers.get("origin")
    if origin is None:
        return True
    return origin.partition("://")[2].rstrip("/") == headers.get("host", "")
