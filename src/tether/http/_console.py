"""The web console (docs/console.md): ``/ui`` serves its page, ``/ui/<file>`` its scripts and
styles, ``/`` redirects to it.

The files are the package's own (``tether/http/console/``): hand-written HTML, CSS and
JavaScript modules, nothing fetched from elsewhere and nothing to build. Each is read once,
when the app is made, and served from memory with an ``ETag`` (a reload revalidates, and gets
304 while nothing changed). The page speaks only to the public HTTP API, like any client.
Every file is a route of its own: there is no path to resolve, so none can leave the folder.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

__all__ = ("CONSOLE_PATH", "console_router")

CONSOLE_PATH = "/ui"
_MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
# The page loads nothing but its own files, and no other site may frame it.
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


@dataclass(frozen=True)
class _File:
    body: bytes
    media_type: str
    etag: str

    def response(self, request: Request) -> Response:
        headers = {
            "ETag": self.etag,
            "Cache-Control": "no-cache",
            "Content-Security-Policy": _POLICY,
            "Referrer-Policy": "no-referrer",
        }
        if request.headers.get("if-none-match") == self.etag:
            return Response(status_code=304, headers=headers)
        return Response(self.body, media_type=self.media_type, headers=headers)


def _files() -> dict[str, _File]:
    folder = files(__package__ or "tether.http") / "console"
    found = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _MEDIA_TYPES:
            body = entry.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            found[entry.name] = _File(body, _MEDIA_TYPES[suffix], etag)
    return dict(sorted(found.items()))


def _serving(file: _File) -> Callable[[Request], Coroutine[Any, Any, Response]]:
    async def serve(request: Request) -> Response:
        return file.response(request)

    return serve


@functools.cache
def console_router() -> APIRouter:
    """The console's page and files, and the redirect from ``/``; none is in the API's
    OpenAPI document (they are not API). Read once a process: every app serves the same."""
    router = APIRouter(include_in_schema=False)
    console = _files()
    page = console.pop("index.html")

    @router.get("/")
    async def home() -> RedirectResponse:
        return RedirectResponse(CONSOLE_PATH, status_code=307)

    router.add_api_route(CONSOLE_PATH, _serving(page), methods=["GET"])
    for name, file in console.items():
        router.add_api_route(f"{CONSOLE_PATH}/{name}", _serving(file), methods=["GET"])
    return router
