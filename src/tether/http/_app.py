"""The ASGI app (docs/architecture.md §7): the routers of each concern, the Guard in front,
typed errors, ``/openapi.json``.

A request reads top-down: the Guard (``_guard``), then one router module, whose route
calls the runtime and returns a response model (``_responses``; the bodies it takes are
in ``_requests``); a failure anywhere is an error envelope (``_errors``). Streams are
written by ``_sse`` (with the events of a session's subagents: ``_family``).
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import AsyncIterator, Hashable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from typing import TYPE_CHECKING

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute, request_response
from fastapi_offline import FastAPIOffline
from starlette.routing import BaseRoute

from tether._extras import install_hint
from tether._sites import SitePolicy
from tether.auth import Authenticate, Authorize, StaticToken
from tether.engine import Runtime
from tether.http._access import ROUTE_SCOPES, requires
from tether.http._approvals import approvals_router
from tether.http._budgets import budgets_router
from tether.http._chat_protocols import chat_protocols_router
from tether.http._console import console_router
from tether.http._console_auth import console_auth_router
from tether.http._console_cookie import DEFAULT_LIFETIME, ConsoleCookies
from tether.http._conversations import conversations_router
from tether.http._dependencies import AppState, SignIn, Streams
from tether.http._dispatch import dispatch_router
from tether.http._errors import Responses, failures, install_error_handlers
from tether.http._guard import Guard
from tether.http._health import health_router
from tether.http._inputs import inputs_router
from tether.http._insights import insights_router
from tether.http._me import me_router
from tether.http._metrics import metrics_router
from tether.http._schedules import schedules_router
from tether.http._sessions import sessions_router
from tether.http._sse import RecentRecords
from tether.http._submissions import submissions_router
from tether.http._usage import usage_router
from tether.http._versions import versions_router
from tether.http._webhook_deliveries import webhook_deliveries_router

if TYPE_CHECKING:
    from tether.http._mcp_server import AgentsOverMcp

__all__ = ("create_app",)

MIB = 1024 * 1024


def create_app(
    runtime: Runtime,
    *,
    auth_token: str | None = None,
    authenticate: Authenticate | None = None,
    authorize: Authorize | None = None,
    heartbeat: float = 15.0,
    max_body: int = MIB,
    body_timeout: float = 60.0,
    manage_runtime: bool = False,
    worker: bool = True,
    webhooks: Sequence[APIRouter] = (),
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    sign_in_lifetime: float = DEFAULT_LIFETIME,
    mcp: bool = False,
) -> FastAPI:
    """The HTTP face of a runtime. With ``manage_runtime`` the app starts and closes it.

    ``auth_token`` (non-empty) is required as ``Authorization: Bearer <token>`` on every
    route but the health checks, and grants every scope; ``authenticate`` instead finds
    each request's :class:`~tether.auth.Identity` (``tether.auth``: stored tokens, JWTs, or
    an application's own hook; docs/auth.md), and each route asks it for its scope (403
    naming the one missing). ``authorize`` (which needs one of them) is asked, on every
    route that names a resource, after its scope and tenant, whether the identity may do
    the route's action to it (:class:`~tether.auth.Resource`: its owner included; 403
    when it answers ``False``). A request body must arrive within ``body_timeout``
    seconds (else 408) and weigh at most ``max_body`` bytes (else 413), and a POST must say
    ``Content-Type: application/json`` (else 415). ``/docs`` and ``/redoc`` serve their
    assets from this server: they work offline. ``/ui`` is the web console
    (docs/console.md), whose sign-in trades the token for a cookie that lasts
    ``sign_in_lifetime`` seconds. ``webhooks`` are routes made by
    :mod:`tether.http.webhooks`: their signature is their auth, so the token does not guard
    their paths. With ``mcp`` (the ``mcp`` extra) the app also speaks MCP at ``/mcp``
    (streamable HTTP, behind the same Guard): each agent a tool, and the approvals inbox
    (docs/mcp.md#serve-agents-over-mcp); its sessions run under the app's lifespan.

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
    if auth_token is not None and authenticate is not None:
        raise ValueError("give auth_token or authenticate, not both")
    if authorize is not None and auth_token is None and authenticate is None:
        raise ValueError("authorize needs auth_token or authenticate: without auth, none is known")
    sites = SitePolicy.of(allowed_hosts, allowed_origins)
    over_mcp = _agents_over_mcp(runtime) if mcp else None
    cookies = None
    if auth_token is not None:
        static = StaticToken(auth_token)
        authenticate = static
        cookies = ConsoleCookies(
            auth_token.encode(), runtime, identity=static.identity, lifetime=sign_in_lifetime
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if manage_runtime:
            await runtime.start(worker=worker)
        try:
            async with over_mcp.running() if over_mcp is not None else nullcontext():
                yield
        finally:
            if manage_runtime:
                await runtime.close()

    # FastAPIOffline: the docs pages load Swagger UI and ReDoc from this server, not a CDN.
    # One schema per model, the one it validates: see _responses on the wire models it holds.
    app = FastAPIOffline(
        title="Tether", version="1", lifespan=lifespan, separate_input_output_schemas=False
    )
    # The app's own state beside the runtime it serves (the routes depend on it: see
    # _dependencies); nothing of the runtime is changed for an app.
    app.state.tether = AppState(
        runtime,
        Streams(heartbeat, RecentRecords(runtime)),
        SignIn(
            auth_token.encode() if auth_token is not None else None,
            cookies,
            authenticate=None if cookies is not None else authenticate,
            lifetime=sign_in_lifetime,
        ),
        authorize,
    )
    install_error_handlers(app)
    hooks = {route.path for router in webhooks for route in router.routes if hasattr(route, "path")}
    app.add_middleware(
        Guard,
        authenticate=authenticate,
        max_body=max_body,
        body_timeout=body_timeout,
        open_paths=frozenset(hooks),
        sites=sites,
        cookies=cookies,
    )

    # The health checks answer whatever the Host and without a credential. With auth, the
    # credential (or the console's cookie) is checked against the store: 503 when it cannot
    # answer; and each route asks the identity for its scope: 403.
    guarded = failures(421, *((401, 403, 503) if authenticate is not None else ()))
    signing_in = {"/ui/login": failures(401)} if authenticate is not None else {}
    for router in _API:
        # Without auth every request holds every scope: no route need ask (each dependency
        # costs a request some 20 µs of FastAPI's resolution).
        _add_routes(app, router, guarded, scoped=authenticate is not None)
    for router in (health_router, *webhooks):
        _add_routes(app, router)
    if over_mcp is not None:  # behind the Guard's every check, as the API's routes
        app.router.routes.append(over_mcp.route)
    # The web console last: no API request is matched against its routes first.
    _add_routes(app, console_auth_router, by_path=signing_in)
    _add_routes(app, console_router())
    return app


def _agents_over_mcp(runtime: Runtime) -> AgentsOverMcp:
    """The app's MCP server, for ``create_app(mcp=True)``: the SDK is an extra, imported
    only then (``ImportError`` naming how to install it)."""
    try:
        from tether.http._mcp_server import AgentsOverMcp
    except ImportError as exc:
        raise ImportError(f"create_app(mcp=True) {install_hint('mcp')}: {exc}") from exc
    return AgentsOverMcp(runtime.agents)


_API = (
    dispatch_router,
    chat_protocols_router,
    sessions_router,
    conversations_router,
    submissions_router,
    approvals_router,
    inputs_router,
    budgets_router,
    usage_router,
    schedules_router,
    webhook_deliveries_router,
    insights_router,
    versions_router,
    me_router,
    metrics_router,
)
"""The routers behind the Guard's every check, in the order a request is matched."""


def _add_routes(
    app: FastAPI,
    router: APIRouter,
    responses: Responses | None = None,
    *,
    by_path: Mapping[str, Responses] | None = None,
    scoped: bool = False,
) -> None:
    """The router's routes among the app's own, each also documenting ``responses`` (what
    this app's Guard may answer before it runs), and ``by_path`` those of its path.

    Each route is this app's own copy: the module's router stays as it is (other apps mount
    it too), and the app's ``dependency_overrides`` reach the copy. Not ``include_router``:
    FastAPI (0.165) keeps an included router whole and matches each request against it as a
    sub-router, twice, some 10 µs of CPU per router the request passes (``/healthz``, behind
    five, took 70 µs more).

    A ``scoped`` router's routes each depend on the scope ``ROUTE_SCOPES`` names for them
    (a route it does not name is a mistake: ``KeyError``).
    """
    variant = (
        scoped,
        frozenset(responses or ()),
        frozenset((path, frozenset(codes)) for path, codes in (by_path or {}).items()),
    )
    built = _BUILT.get(id(router))
    if built is None:  # routers compare by value, unhashable: by identity, while it lives
        built = _BUILT[id(router)] = {}
        weakref.finalize(router, _BUILT.pop, id(router), None)
    if variant not in built:
        built[variant] = _built_routes(router, responses, by_path, scoped)
    for route in built[variant]:
        app.router.routes.append(_for_app(route, app) if isinstance(route, APIRoute) else route)


_BUILT: dict[int, dict[Hashable, list[BaseRoute]]] = {}
"""Each router's routes as built for an app, by what the app adds to them (scopes, documented
failures): FastAPI's building of a route (a pydantic adapter for each parameter and response)
is most of the CPU an app's creation takes, a fifth of a second for all of them, and every
app of one kind builds the same routes."""


def _built_routes(
    router: APIRouter,
    responses: Responses | None,
    by_path: Mapping[str, Responses] | None,
    scoped: bool,
) -> list[BaseRoute]:
    """The router's routes, each built again as FastAPI's ``add_api_route`` builds one."""
    staging = APIRouter()
    for route in router.routes:
        if not isinstance(route, APIRoute):
            staging.routes.append(route)
            continue
        extra = {**(responses or {}), **(by_path or {}).get(route.path, {})}
        dependencies = list(route.dependencies)
        if scoped:
            [method] = route.methods or {"GET"}
            scope = ROUTE_SCOPES[method, route.path]
            if scope is not None:
                dependencies.append(Depends(requires(scope)))
        staging.add_api_route(
            route.path,
            route.endpoint,
            response_model=route.response_model,
            status_code=route.status_code,
            tags=route.tags,
            dependencies=dependencies,
            summary=route.summary,
            description=route.description,
            response_description=route.response_description,
            responses={**extra, **route.responses},
            deprecated=route.deprecated,
            methods=route.methods,
            operation_id=route.operation_id,
            response_model_include=route.response_model_include,
            response_model_exclude=route.response_model_exclude,
            response_model_by_alias=route.response_model_by_alias,
            response_model_exclude_unset=route.response_model_exclude_unset,
            response_model_exclude_defaults=route.response_model_exclude_defaults,
            response_model_exclude_none=route.response_model_exclude_none,
            include_in_schema=route.include_in_schema,
            response_class=route.response_class,
            name=route.name,
            callbacks=route.callbacks,
            openapi_extra=route.openapi_extra,
            generate_unique_id_function=route.generate_unique_id_function,
            strict_content_type=route.strict_content_type,
            # no max_body_size: the Guard bounds every body, a route's own limit is never set
        )
    return list(staging.routes)


def _for_app(built: APIRoute, app: FastAPI) -> APIRoute:
    """A copy of a built route answering for ``app``: what FastAPI built for it (its
    dependant, its parameters' and response's fields) is shared, only its request handler,
    which resolves dependencies through the app's ``dependency_overrides``, is the app's."""
    route = copy.copy(built)
    route.dependency_overrides_provider = app
    route.app = request_response(route.get_route_handler())  # as APIRoute's own, unlimited
    return route
