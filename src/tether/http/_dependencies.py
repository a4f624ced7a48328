"""What a route is given (FastAPI's ``Depends``): the runtime the app serves, and the app's
own state, which ``create_app`` keeps in ``app.state``. A router is a module-level object,
so a route can be mounted on an app of one's own, and any of these overridden
(``app.dependency_overrides[runtime_dependency] = ...``), the runtime above all.

Nothing here reaches into the runtime: what the app keeps beside it is its own. Each is a
coroutine function because FastAPI runs a plain ``def`` dependency in its thread pool: a
thread hop on every request to read an attribute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from tether.auth import Authenticate, Authorize
from tether.engine import Runtime
from tether.http._console_cookie import DEFAULT_LIFETIME, ConsoleCookies
from tether.http._sse import RecentRecords

__all__ = (
    "AppState",
    "RuntimeDependency",
    "SignIn",
    "SignInDependency",
    "Streams",
    "StreamsDependency",
    "runtime_dependency",
    "sign_in_dependency",
    "streams_dependency",
)


@dataclass(frozen=True, slots=True)
class Streams:
    """How this app's SSE streams run: the heartbeat (seconds) and the newest records of
    each followed conversation, shared by its subscribers."""

    heartbeat: float
    recent: RecentRecords


@dataclass(frozen=True, slots=True)
class SignIn:
    """The console's sign-in: the server's shared token and its cookies, or the server's
    other authentication (``authenticate``: stored tokens, JWTs), or neither (no auth)."""

    token: bytes | None
    cookies: ConsoleCookies | None
    authenticate: Authenticate | None = None
    lifetime: float = DEFAULT_LIFETIME


@dataclass(frozen=True, slots=True)
class AppState:
    """What ``create_app`` keeps in ``app.state.tether``."""

    runtime: Runtime
    streams: Streams
    sign_in: SignIn
    authorize: Authorize | None = None
    """The application's rules beyond scopes, asked about each resource a route names."""


def _state(request: Request) -> AppState:
    state: AppState = request.app.state.tether
    return state


async def runtime_dependency(request: Request) -> Runtime:
    """The runtime whose public operations every route calls.

    Example::

        app = create_app(runtime)
        app.dependency_overrides[runtime_dependency] = lambda: other_runtime
    """
    return _state(request).runtime


async def streams_dependency(request: Request) -> Streams:
    return _state(request).streams


async def sign_in_dependency(request: Request) -> SignIn:
    return _state(request).sign_in


RuntimeDependency = Annotated[Runtime, Depends(runtime_dependency)]
StreamsDependency = Annotated[Streams, Depends(streams_dependency)]
SignInDependency = Annotated[SignIn, Depends(sign_in_dependency)]
