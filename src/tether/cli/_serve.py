"""``tether serve`` and ``tether worker``: run a runtime, with or without HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import ipaddress
from collections.abc import Iterator, Mapping

import typer
import uvicorn

from tether.cli._logs import show_tether_logs, uvicorn_log_level
from tether.engine import AgentDefinition, Interceptor, Runtime
from tether.http import create_app
from tether.store import DEFAULT_STORE_URL

__all__ = ("load_agents", "serve", "worker")

LEASE = typer.Option(
    30.0,
    "--lease",
    min=0.5,
    help="Seconds a claim lasts unrenewed: how soon a crashed worker's run is taken over.",
)
OTLP = typer.Option(
    None,
    "--otlp-endpoint",
    envvar="OTEL_EXPORTER_OTLP_ENDPOINT",
    help="Export spans to this OTLP/HTTP collector (e.g. http://127.0.0.1:4318); "
    "needs the otel extra.",
)


@contextlib.contextmanager
def _tracing(endpoint: str | None) -> Iterator[list[Interceptor]]:
    """The interceptors that export spans to ``endpoint`` (none without one); flushed on exit."""
    if endpoint is None:
        yield []
        return
    try:
        from tether.otel import OtelInterceptor, otlp_provider
    except ImportError as exc:
        raise typer.BadParameter(
            f"needs the otel extra (pip install 'tether[otel]'): {exc}",
            param_hint="--otlp-endpoint",
        ) from exc
    provider = otlp_provider(endpoint)
    try:
        yield [OtelInterceptor(provider.get_tracer("tether"))]
    finally:
        provider.shutdown()


def load_agents(app: str | None, demo: bool) -> Mapping[str, AgentDefinition]:
    """Agents from ``--app module:factory`` (a function returning ``{name: AgentDefinition}``)
    and/or the keyless demo."""
    agents: dict[str, AgentDefinition] = {}
    if demo:
        from tether.demo import demo_agents

        agents.update(demo_agents())
    if app is not None:
        module_name, _, attribute = app.partition(":")
        if not module_name or not attribute:
            raise typer.BadParameter("use module:factory", param_hint="--app")
        factory = getattr(importlib.import_module(module_name), attribute)
        agents.update(factory() if callable(factory) else factory)
    if not agents:
        raise typer.BadParameter("give --demo or --app module:factory")
    return agents


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    demo: bool = typer.Option(False, "--demo", help="Register the keyless demo agent `assistant`."),
    app: str | None = typer.Option(
        None, "--app", help="module:factory returning {name: AgentDefinition}."
    ),
    store: str = typer.Option(
        DEFAULT_STORE_URL,
        "--store",
        help="Store URL (sqlite:///dir, postgresql://user@host/db, memory://).",
    ),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8484, "--port"),
    no_worker: bool = typer.Option(
        False, "--no-worker", help="Serve the API only; run no submissions."
    ),
    auth_token: str | None = typer.Option(None, "--auth-token", envvar="TETHER_AUTH_TOKEN"),
    allow_unauthenticated: bool = typer.Option(
        False, "--allow-unauthenticated", help="Serve a non-loopback address without a token."
    ),
    heartbeat: float = typer.Option(15.0, "--heartbeat", help="Seconds between SSE heartbeats."),
    lease: float = LEASE,
    otlp_endpoint: str | None = OTLP,
) -> None:
    """Serve the HTTP API (and run submissions unless --no-worker)."""
    if not _loopback(host) and auth_token is None and not allow_unauthenticated:
        raise typer.BadParameter(
            f"refusing to serve {host} without --auth-token (or TETHER_AUTH_TOKEN); "
            "pass --allow-unauthenticated if something in front of it authenticates",
            param_hint="--host",
        )
    agents = load_agents(app, demo)
    show_tether_logs()
    with _tracing(otlp_endpoint) as interceptors:
        runtime = Runtime(agents, store, lease=lease, interceptors=interceptors)
        application = create_app(
            runtime,
            auth_token=auth_token,
            heartbeat=heartbeat,
            manage_runtime=True,
            worker=not no_worker,
        )
        typer.echo(f"tether serving {', '.join(agents)} on http://{host}:{port} (store {store})")
        _freeze_startup_heap()
        uvicorn.run(
            application,
            host=host,
            port=port,
            log_level=uvicorn_log_level(),
        )


def worker(
    store: str = typer.Option(
        DEFAULT_STORE_URL,
        "--store",
        help="Store URL (sqlite:///dir, postgresql://user@host/db); run several on PostgreSQL.",
    ),
    app: str | None = typer.Option(None, "--app"),
    demo: bool = typer.Option(False, "--demo"),
    lease: float = LEASE,
    otlp_endpoint: str | None = OTLP,
) -> None:
    """Run submissions from the store, without HTTP."""
    agents = load_agents(app, demo)
    show_tether_logs()

    async def run(interceptors: list[Interceptor]) -> None:
        async with Runtime(agents, store, lease=lease, interceptors=interceptors):
            await asyncio.Event().wait()

    with _tracing(otlp_endpoint) as interceptors, contextlib.suppress(KeyboardInterrupt):
        _freeze_startup_heap()
        asyncio.run(run(interceptors))


def _freeze_startup_heap() -> None:
    """Move everything allocated so far (the interpreter, the libraries, the app) out of the
    collector's reach: a full collection otherwise rescans it all, about 45 ms here, a stall
    that lands on whichever request is running. This process is ours, so the collector
    settings are ours to choose; an application embedding a ``Runtime`` may do the same."""
    gc.collect()
    gc.freeze()
