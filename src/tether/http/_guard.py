"""Checks every request passes before it reaches a route (auth, body size, content type),
and ``X-Content-Type-Options: nosniff`` on every response, whatever produced it.

A plain ASGI middleware rather than Starlette's ``BaseHTTPMiddleware``: that one
re-buffers streaming responses, and SSE streams must go out frame by frame.
"""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tether.http._errors import error_response

__all__ = ("Guard",)

_OPEN_PATHS = frozenset({"/healthz", "/readyz"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_NOSNIFF = (b"x-content-type-options", b"nosniff")


class Guard:
    """Answer 401/413/415 in the error envelope; cap bodies whether sized or chunked."""

    def __init__(self, app: ASGIApp, *, auth_token: str | None, max_body: int) -> None:
        self.app = app
        self.expected = f"Bearer {auth_token}".encode() if auth_token is not None else None
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}

        async def send_nosniff(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), _NOSNIFF]
            await send(message)

        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send_nosniff)
            return
        await self._forward(scope, receive, send_nosniff)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> Any:
        if self.expected is not None and scope["path"] not in _OPEN_PATHS:
            given = headers.get("authorization", "").encode("latin-1")
            if not hmac.compare_digest(given, self.expected):
                return error_response(401, "unauthorized", "a bearer token is required")
        if scope["method"] not in _BODY_METHODS:
            return None
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return self._too_large()
        media_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if length != "0" and media_type not in ("application/json", ""):
            return error_response(415, "unsupported_media_type", "send application/json")
        return None

    def _too_large(self) -> Any:
        return error_response(413, "payload_too_large", f"the body is over {self.max_body} bytes")

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    # Chunked bodies carry no Content-Length; stop reading at the cap.
                    raise HTTPException(413, f"the body is over {self.max_body} bytes")
            return message

        await self.app(scope, counted_receive, send)
