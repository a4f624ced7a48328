"""``tether serve`` and ``tether worker``: run a runtime, with or without HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import signal
import socket
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tether._extras import install_hint
from tether._failpoints import arm_from_environment
from tether._gc import freeze_startup_heap
from tether._sites import SitePolicy
from tether._urls import redact_url
from tether.cli._application import load_app
from tether.cli._auth import (
    AUTH,
    AUTHORIZE,
    JWKS,
    JWT_AUDIENCE,
    JWT_ISSUER,
    JWT_KEY,
    JWT_SCOPE_CLAIM,
    JWT_TENANT_CLAIM,
    AuthChoice,
    choose_auth,
)
from tether.cli._exit import ExitCode, fail
from tether.cli._export_keys import load_export_key
from tether.cli._logs import (
    LOG_FORMAT,
    LOG_LEVEL,
    LogFormat,
    LogLevel,
    show_tether_logs,
    uvicorn_log_level,
)
from tether.cli._model import check_model
from tether.cli._retention import KEEP_RECORDS, PRUNE_EVERY, RETAIN_DAYS, retention_of
from tether.cli._stores import DEFAULT_STORE_URL, open_store_or_fail
from tether.errors import FailpointSpecInvalid

if TYPE_CHECKING:
    from tether.cli._settings import Resolved, Settings
    from tether.engine import App, Interceptor, Runtime

# The server stack (uvicorn, FastAPI, the engine, the stores) is imported by the commands that
# run it, never at import: ``tether --help`` and the client commands load this module too.

__all__ = ("APP", "CONFIG", "DEFAULT_STORE_URL", "SETTINGS_EPILOG", "serve", "worker")

CONFIG = typer.Option(
    None,
    "--config",
    envvar="TETHER_CONFIG",
    metavar="FILE",
    help="Read settings from this TOML file (default: ./tether.toml, else [tool.tether] "
    "in ./pyproject.toml).",
)
APP = typer.Option(
    None,
    "--app",
    help="module:attr: a tether.App (or a function returning one, or returning "
    "{name: AgentDefinition}).",
)
SETTINGS_EPILOG = (
    "Every option can also be set by an environment variable, TETHER_ and its name "
    "(--auth-token: TETHER_AUTH_TOKEN), or in tether.toml (auth-token = ...): a flag "
    "wins over a variable, a variable over the file, and any of them over what --app's "
    "App says. `tether config` shows the values in effect and where each came from."
)

SHUTDOWN_GRACE = 5
"""Seconds a stopping server waits for open requests (followed streams) before it cuts them."""
LEASE = typer.Option(
    30.0,
    "--lease",
    min=0.5,
    help="Seconds a claim lasts unrenewed: how soon a crashed worker's run is taken over.",
)
SCHEDULE_MIN_PERIOD = typer.Option(
    1.0,
    "--schedule-min-period",
    min=0.001,
    help="Seconds: the closest two windows of one schedule may be; a schedule under it is "
    "refused (422), and one the store keeps does not fire.",
)
EXPORT_KEY_FILE = typer.Option(
    None,
    "--export-key-file",
    help="Sign every export served with this Ed25519 key (a PEM file: `tether export-key "
    "--new PATH`), so `tether import --require-signed` can tell them from forgeries.",
)
OTLP = typer.Option(
    None,
    "--otlp-endpoint",
    help="Export spans and metrics to this OTLP/HTTP collector (e.g. http://127.0.0.1:4318); "
    "needs the otel extra.",
)

ALLOWED_HOSTS = typer.Option(
    None,
    "--allowed-host",
    metavar="HOST",
    help="Also answer requests for this Host (a name behind a proxy, e.g. agents.example.com; "
    "* for any): only loopback names, --host and the address a connection came in on are "
    "answered otherwise (421), which keeps DNS-rebinding pages out. Repeatable.",
)
ALLOWED_ORIGINS = typer.Option(
    None,
    "--allowed-origin",
    metavar="ORIGIN",
    help="Let pages of this origin (https://app.example.com) change things; only the "
    "server's own may otherwise (403). Repeatable.",
)


@contextlib.contextmanager
def _telemetry(endpoint: str | None) -> Iterator[dict[str, Any]]:
    """The runtime options that export spans and metrics to ``endpoint`` (its interceptors
    and metric sinks: none without one); flushed on exit."""
    if endpoint is None:
        yield {"interceptors": []}
        return
    try:
        from tether.otel import OtelInterceptor, otlp_metrics, otlp_provider
    except ImportError as exc:
        raise typer.BadParameter(
            f"{install_hint('otel')}: {exc}",
            param_hint="--otlp-endpoint",
        ) from exc
    provider = otlp_provider(endpoint)
    metrics = otlp_metrics(endpoint)
    try:
        interceptors: list[Interceptor] = [OtelInterceptor(provider.get_tracer("tether"))]
        yield {"interceptors": interceptors, "metric_sinks": [metrics]}
    finally:
        provider.shutdown()
        metrics.shutdown()


def _require_mcp() -> None:
    """Stops ``serve --mcp`` before anything is opened when the ``mcp`` extra is missing."""
    try:
        import mcp.server.streamable_http_manager  # noqa: F401
    except ImportError as exc:
        raise typer.BadParameter(f"{install_hint('mcp')}: {exc}", param_hint="--mcp") from exc


def _listed(values: list[str] | None) -> list[str]:
    """A repeatable option's values, each of which may list several (commas or spaces, as
    an environment variable does)."""
    return [item for value in values or () for item in value.replace(",", " ").split()]


def _allowed_hosts(host: str, allowed: list[str]) -> list[str]:
    """``--allowed-host``'s, and the name ``--host`` binds: a server on ``localhost`` or on
    a name of its own answers to it (an address it answers anyway, as a connection's own;
    all interfaces are no one name)."""
    return [*([] if host in ("0.0.0.0", "::") else [host]), *allowed]


def _check_sites(host: str, hosts: list[str], origins: list[str]) -> None:
    """Stops ``serve`` before anything is opened on a host or origin that is none."""
    for hint, checked in (
        ("--host", ([host], ())),
        ("--allowed-host", (hosts, ())),
        ("--allowed-origin", ((), origins)),
    ):
        try:
            SitePolicy.of(*checked)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=hint) from None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    ctx: typer.Context,
    demo: bool = typer.Option(False, "--demo", help="Register the keyless demo agents."),
    app: str | None = APP,
    store: str = typer.Option(
        DEFAULT_STORE_URL,
        "--store",
        help="Store URL (sqlite:///dir, postgresql://user@host/db, memory://).",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="The address to listen on."),
    port: int = typer.Option(
        8484, "--port", min=0, max=65535, help="The port to listen on (0: any free port)."
    ),
    no_worker: bool = typer.Option(
        False, "--no-worker", help="Serve the API only; run no submissions."
    ),
    mcp: bool = typer.Option(
        False,
        "--mcp",
        help="Also serve each agent as an MCP tool, and the approvals inbox, at /mcp "
        "(streamable HTTP, under the same auth); needs the mcp extra.",
    ),
    auth: str | None = AUTH,
    authorize: str | None = AUTHORIZE,
    auth_token: str | None = typer.Option(
        None,
        "--auth-token",
        help="Require this bearer token on every request (it holds every scope).",
    ),
    jwks: str | None = JWKS,
    jwt_key: str | None = JWT_KEY,
    jwt_audience: str | None = JWT_AUDIENCE,
    jwt_issuer: str | None = JWT_ISSUER,
    jwt_tenant_claim: str = JWT_TENANT_CLAIM,
    jwt_scope_claim: str = JWT_SCOPE_CLAIM,
    allow_unauthenticated: bool = typer.Option(
        False,
        "--allow-unauthenticated",
        help="Serve a non-loopback address without --auth (or --auth-token).",
    ),
    allowed_host: list[str] | None = ALLOWED_HOSTS,
    allowed_origin: list[str] | None = ALLOWED_ORIGINS,
    sign_in_hours: float = typer.Option(
        12.0,
        "--sign-in-hours",
        min=0.01,
        help="Hours a web console sign-in lasts (with --auth-token).",
    ),
    heartbeat: float = typer.Option(15.0, "--heartbeat", help="Seconds between SSE heartbeats."),
    lease: float = LEASE,
    otlp_endpoint: str | None = OTLP,
    retain_days: list[str] | None = RETAIN_DAYS,
    keep_records: int | None = KEEP_RECORDS,
    prune_every: float = PRUNE_EVERY,
    schedule_min_period: float = SCHEDULE_MIN_PERIOD,
    export_key_file: Path | None = EXPORT_KEY_FILE,
    config: Path | None = CONFIG,
    log_format: LogFormat = LOG_FORMAT,
    log_level: LogLevel = LOG_LEVEL,
) -> None:
    """Serve the HTTP API (and run submissions unless --no-worker)."""
    from tether.cli._settings import ServeSettings, from_context

    resolved = from_context(ctx, ServeSettings, config)
    given = resolved.settings
    loaded = load_app(given.app, given.demo)
    access = choose_auth(
        given.auth,
        given.auth_token,
        jwks=given.jwks,
        jwt_key=given.jwt_key,
        audience=given.jwt_audience,
        issuer=given.jwt_issuer,
        tenant_claim=given.jwt_tenant_claim,
        scope_claim=given.jwt_scope_claim,
        authorize=given.authorize,
        app_authenticate=loaded.authenticate,
        app_authorize=loaded.authorize,
    )
    host = given.host
    if not _loopback(host) and not access.secured and not given.allow_unauthenticated:
        raise typer.BadParameter(
            f"refusing to serve {host} without --auth (or --auth-token, TETHER_AUTH_TOKEN); "
            "pass --allow-unauthenticated if something in front of it authenticates",
            param_hint="--host",
        )
    hosts, origins = _listed(given.allowed_host), _listed(given.allowed_origin)
    _check_sites(host, hosts, origins)
    if given.mcp:
        _require_mcp()
    overrides = _runtime_overrides(resolved)
    if resolved.given("export_key_file"):
        overrides["export_key"] = load_export_key(given.export_key_file, "--export-key-file")
    check_model()  # a bad TETHER_MODEL fails here, not at the first request
    show_tether_logs(given.log_format, given.log_level, tracing=given.otlp_endpoint is not None)
    listener = _listen(host, given.port)  # before the store opens: a busy port changes nothing
    with listener, _telemetry(given.otlp_endpoint) as telemetry:
        _run(
            _serve(
                listener,
                host,
                loaded,
                _store_url(resolved, loaded),
                worker=not given.no_worker,
                runtime_options={**overrides, **telemetry},
                access=access,
                app_options={
                    "heartbeat": given.heartbeat,
                    "allowed_hosts": _allowed_hosts(host, hosts),
                    "allowed_origins": origins,
                    "sign_in_lifetime": given.sign_in_hours * 3600,
                    "mcp": given.mcp,
                },
                uvicorn_level=uvicorn_log_level(given.log_level),
            )
        )


def _store_url(resolved: Resolved[Any], app: App) -> str:
    """``--store`` if it was set (by flag, variable or file), else the App's, else the
    default."""
    settings: Settings = resolved.settings
    if resolved.given("store") or app.store is None:
        return settings.store
    return app.store


def _runtime_overrides(resolved: Resolved[Any]) -> dict[str, Any]:
    """The engine settings the options set (by flag, variable or file), over the App's:
    what none of them set is the App's (or the engine's default)."""
    settings: Settings = resolved.settings
    overrides: dict[str, Any] = {}
    for name in ("lease", "schedule_min_period"):
        if resolved.given(name):
            overrides[name] = getattr(settings, name)
    if any(resolved.given(name) for name in ("retain_days", "keep_records", "prune_every")):
        overrides["retention"] = retention_of(
            settings.retain_days, settings.keep_records, settings.prune_every
        )
    return overrides


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound and listening on ``host:port``; exits with
    :attr:`ExitCode.ADDRESS_UNAVAILABLE` if the address is taken or not one of this host's."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Made as a TCP socket by name: asyncio turns Nagle's algorithm off (TCP_NODELAY) only
    # for connections whose socket says IPPROTO_TCP, and socket.create_server's says 0. With
    # Nagle on, a response written in two parts (uvicorn writes headers, then the body) waits
    # for the client's delayed ACK: some 40 ms on every request of a kept-alive connection.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(2048)
        return sock
    except OSError as exc:
        sock.close()
        # socket.create_server appends "(while attempting to bind ...)" to the reason.
        reason = (exc.strerror or str(exc)).split(" (while attempting", 1)[0]
        hint = " (another server holds it: stop it or choose another --port)"
        hint = hint if exc.errno == errno.EADDRINUSE else ""
        fail(f"cannot listen on {host}:{port}: {reason}{hint}", ExitCode.ADDRESS_UNAVAILABLE)


def _run(main: Coroutine[Any, Any, None]) -> None:
    try:
        asyncio.run(main)
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were in place
        raise typer.Exit(ExitCode.INTERRUPTED) from None


def _check_failpoints() -> None:
    """``TETHER_FAILPOINTS`` armed (docs/testing.md), or one line and exit 2 if it does not
    parse: before the store is opened, not as a traceback from the runtime's start."""
    try:
        arm_from_environment()
    except FailpointSpecInvalid as exc:
        fail(str(exc), ExitCode.USAGE)


@contextlib.asynccontextmanager
async def _running(
    app: App, store_url: str, *, worker: bool, options: Any
) -> AsyncIterator[tuple[Runtime, asyncio.Event]]:
    """A started runtime on the store ``store_url`` names (one line and an exit code if it
    cannot be opened), and the event SIGINT or SIGTERM sets: both stop the process gracefully,
    releasing running work without burning an attempt."""
    from tether.engine import Runtime

    _check_failpoints()
    store = await open_store_or_fail(store_url, create=True)
    try:
        runtime = Runtime.from_app(app, store, **options)
        await runtime.start(worker=worker)
        try:
            loop, stop = asyncio.get_running_loop(), asyncio.Event()
            # A loop handler, not signal.signal: uvicorn swaps in its own while serving and,
            # once stopped, raises the signal again, which must then land here, not kill us
            # before the runtime is closed.
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            try:
                yield runtime, stop
            finally:
                for signum in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(signum)
        finally:
            await runtime.close()
    finally:
        await store.close()


async def _serve(
    listener: socket.socket,
    host: str,
    app: App,
    store_url: str,
    *,
    worker: bool,
    access: AuthChoice,
    runtime_options: dict[str, Any],
    app_options: dict[str, Any],
    uvicorn_level: str = "warning",
) -> None:
    import uvicorn

    from tether.cli._announce import AnnouncingServer
    from tether.http import create_app

    async with contextlib.AsyncExitStack() as stack:
        runtime, _ = await stack.enter_async_context(
            _running(app, store_url, worker=worker, options=runtime_options)
        )
        authentication = await stack.enter_async_context(access.app_options(runtime))
        try:
            application = create_app(runtime, worker=worker, **authentication, **app_options)
        except ValueError as exc:  # what the app's agents cannot be served as (--mcp)
            fail(f"cannot serve the app: {exc}", ExitCode.BAD_APP)
        port = listener.getsockname()[1]
        shown_host = f"[{host}]" if ":" in host else host
        banner = (
            f"tether serving {', '.join(app.agents)} on http://{shown_host}:{port} "
            f"(store {redact_url(store_url)})"
        )
        # A followed stream (an open console tab, a `tail -f`) would hold a SIGTERM's shutdown
        # until its client left: after the grace, uvicorn cancels what is still open.
        # log_config=None: uvicorn's lines go to the root handler, in --log-format.
        config = uvicorn.Config(
            application,
            log_level=uvicorn_level,
            log_config=None,
            timeout_graceful_shutdown=SHUTDOWN_GRACE,
        )
        server = AnnouncingServer(config, banner)
        freeze_startup_heap()
        await server.serve(sockets=[listener])


def worker(
    ctx: typer.Context,
    store: str = typer.Option(
        DEFAULT_STORE_URL,
        "--store",
        help="Store URL (sqlite:///dir, postgresql://user@host/db); run several on PostgreSQL.",
    ),
    app: str | None = APP,
    demo: bool = typer.Option(False, "--demo", help="Register the keyless demo agents."),
    lease: float = LEASE,
    otlp_endpoint: str | None = OTLP,
    retain_days: list[str] | None = RETAIN_DAYS,
    keep_records: int | None = KEEP_RECORDS,
    prune_every: float = PRUNE_EVERY,
    schedule_min_period: float = SCHEDULE_MIN_PERIOD,
    config: Path | None = CONFIG,
    log_format: LogFormat = LOG_FORMAT,
    log_level: LogLevel = LOG_LEVEL,
) -> None:
    """Run submissions from the store, without HTTP."""
    from tether.cli._settings import WorkerSettings, from_context

    resolved = from_context(ctx, WorkerSettings, config)
    given = resolved.settings
    loaded = load_app(given.app, given.demo)
    overrides = _runtime_overrides(resolved)
    store_url = _store_url(resolved, loaded)
    check_model()
    show_tether_logs(given.log_format, given.log_level, tracing=given.otlp_endpoint is not None)

    async def run(telemetry: dict[str, Any]) -> None:
        options = {**overrides, **telemetry}
        async with _running(loaded, store_url, worker=True, options=options) as (_, stop):
            typer.echo(
                f"tether worker running {', '.join(loaded.agents)} (store {redact_url(store_url)})"
            )
            freeze_startup_heap()
            await stop.wait()

    with _telemetry(given.otlp_endpoint) as telemetry:
        _run(run(telemetry))
