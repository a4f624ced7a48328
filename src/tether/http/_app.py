"""The ASGI app (docs/architecture.md §7): the routers of each concern, the Guard in front,
typed errors, ``/openapi.json``.

A request reads top-down: the Guard (``_guard``), then one router module, whose route
calls the runtime and returns a response model (``_responses``; the bodies it takes are
in ``_requests``); a failure anywhere is an error envelope (``_errors``). Streams are
written by ``_sse`` (with the events of a session's subagents: ``_family``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from fastapi_offline import FastAPIOffline

from tether._sites import SitePolicy
from tether.engine import Runtime
from tether.http._approvals import approvals_router
from tether.http._console import console_router
from tether.http._console_auth import console_auth_router
from tether.http._console_cookie import DEFAULT_LIFETIME, ConsoleCookies
from tether.http._conversations import conversations_router
from tether.http._dispatch import dispatch_router
from tether.http._errors import failures, install_error_handlers
from tether.http._guard import Guard
from tether.http._health import health_router
from tether.http._inputs import inputs_router
from tether.http._insights import insights_router
from tether.http._progress import ProgressHub
from tether.http._schedules import schedules_router
from tether.http._sessions import sessions_router
from tether.http._submissions import submissions_router

__all__ = ("create_app",)

MIB = 1024 * 1024


def create_app(
    runtime: Runtime,
    *,
    auth_token: str | None = None,
    heartbeat: float = 15.0,
    max_body: int = MIB,
    body_timeout: float = 60.0,
    manage_runtime: bool = False,
    worker: bool = True,
    webhooks: Sequence[APIRouter] = (),
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    sign_in_lifetime: float = DEFAULT_LIFETIME,
) -> FastAPI:
    """The HTTP face of a runtime. With ``manage_runtime`` the app starts and closes it.

    ``auth_token`` (non-empty) is required as ``Authorization: Bearer <token>`` on every
    route but the health checks; a request body must arrive within ``body_timeout``
    seconds (else 408) and weigh at most ``max_body`` bytes (else 413), and a POST must say
    ``Content-Type: application/json`` (else 415). ``/docs`` and ``/redoc`` serve their
    assets from this server: they work offline. ``/ui`` is the web console
    (docs/console.md), whose sign-in trades the token for a cookie that lasts
    ``sign_in_lifetime`` seconds. ``webhooks`` are routes made by
    :mod:`tether.http.webhooks`: their signature is their auth, so the token does not guard
    their paths.

    Other sites' pages are kept out (docs/serving.md): the app answers a ``Host`` that is
    a loopback name, the address the connection came in on, or one of ``allowed_hosts``
    (else 421; ``"*"`` allows any), and a request that changes something only from its own
    origin or one of ``allowed_origins`` (``https://app.example.com``; else 403).

    Example::

        runtime = Runtime(demo_agents(), "sqlite:///./tether-data", subagents=demo_subagents())
        app = create_app(runtime, manage_runtime=True)
        # uvicorn.run(app, port=8484)
    """

    if auth_token is not None and not auth_token.strip():
        raise ValueError("auth_token is empty: give a token, or None to serve without auth")
    sites = SitePolicy.of(allowed_hosts, allowed_origins)
    cookies = (
        ConsoleCookies(auth_token.encode(), runtime, lifetime=sign_in_lifetime)
        if auth_token is not None
        else None
    )
    progress = _progress_hub(runtime)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if manage_runtime:
            await runtime.start(worker=worker)
        try:
            yield
        finally:
            if manage_runtime:
                await runtime.close()

    # FastAPIOffline: the docs pages load Swagger UI and ReDoc from this server, not a CDN.
    # One schema per model, the one it validates: see _responses on the wire models it holds.
    app = FastAPIOffline(
        title="Tether", version="1", lifespan=lifespan, separate_input_output_schemas=False
    )
    install_error_handlers(app)
    hooks = {route.path for router in webhooks for route in router.routes if hasattr(route, "path")}
    app.add_middleware(
        Guard,
        auth_token=auth_token,
        max_body=max_body,
        body_timeout=body_timeout,
        open_paths=frozenset(hooks),
        sites=sites,
        cookies=cookies,
    )

    # The health checks answer whatever the Host and without a token. With one, the console's
    # cookie is checked against the store's revocations: 503 when it cannot answer.
    guarded = failures(421, *((401, 503) if auth_token is not None else ()))
    for router in (
        dispatch_router(runtime, heartbeat=heartbeat, progress=progress, responses=guarded),
        sessions_router(runtime, responses=guarded),
        conversations_router(runtime, responses=guarded),
        submissions_router(runtime, responses=guarded),
        approvals_router(runtime, responses=guarded),
        inputs_router(runtime, responses=guarded),
        schedules_router(runtime, responses=guarded),
        insights_router(runtime, responses=guarded),
        health_router(runtime),
        *webhooks,
        # The web console last: no API request is matched against its routes first.
        console_auth_router(auth_token, cookies),
        console_router(),
    ):
        _add_routes(app, router)
    return app


def _progress_hub(runtime: Runtime) -> ProgressHub:
    """The runtime's hub of tool progress (never stored: it reaches the streams of this
    process's runs), added to its observers by the first app made for it. Every app of the
    runtime shares it: one per app, never removed, grew the observers with each app."""
    for observer in runtime.instrumentation.observers:
        if isinstance(observer, ProgressHub):
            return observer
    progress = ProgressHub()
    runtime.instrumentation.observers.append(progress)
    return progress


def _add_routes(app: FastAPI, router: APIRouter) -> None:
    """The router's routes, as they are, among the app's own.

    Not ``include_router``: FastAPI (0.165) keeps an included router whole and matches each
    request against it as a sub-router, twice, some 10 µs of CPU per router the request
    passes (``/healthz``, behind five, took 70 µs more). A route built by a router already
    holds the router's tags and ``responses``.
    """
    app.router.routes.extend(router.routes)
