"""``/healthz`` (the process answers) and ``/readyz`` (what it depends on is up: the store
takes writes, a worker holds its liveness lock). Both are open when auth is on, and answer
whatever the ``Host``: a load balancer asks them without a token, naming whatever address
it probes."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import Response

from tether.http._dependencies import RuntimeDependency
from tether.http._errors import ApiError, failures, internal_error_response
from tether.http._responses import respond
from tether.wire import Alive, DependencyItem, Ready

__all__ = ("health_router",)

logger = logging.getLogger("tether.http")


health_router = APIRouter(tags=["health"])
"""Liveness and readiness, open whatever the auth."""


@health_router.get("/healthz", responses=failures())
async def healthz() -> Alive:
    """Liveness: the server answers."""
    return Alive(ok=True)


@health_router.get("/readyz", response_model=Ready, responses=failures(503))
async def readyz(runtime: RuntimeDependency) -> Response:
    """Readiness: each dependency and its state. The store must commit a heartbeat write (a
    full disk is not ready), a worker on a store that offers liveness locks must hold its own,
    and a configured OTLP exporter reports its last export (not required: a collector that
    is down loses telemetry, not work). 503 ``not_ready`` when a required one is down (or
    the runtime closes), its ``details`` listing them all; why the store is down is in the
    server's log, not in the answer, which anyone may ask for."""
    try:
        found = await runtime.readiness()
    except Exception:
        # A defect of Tether's, not a state to wait out (a load balancer would take the
        # node out and put it back forever): its traceback goes to the log only.
        logger.exception("GET /readyz failed")
        return internal_error_response()
    dependencies = [
        DependencyItem(
            name=dependency.name,
            state=dependency.state,
            required=dependency.required,
            detail=dependency.detail,
        )
        for dependency in found
    ]
    down = [dependency for dependency in found if not dependency.ready]
    if down:
        message = "; ".join(f"{d.name}: {d.detail or d.state}" for d in down)
        details = {
            "dependencies": [
                item.model_dump(by_alias=True, exclude_none=True) for item in dependencies
            ]
        }
        raise ApiError(503, "not_ready", message, details)
    return respond(Ready(ready=True, dependencies=dependencies))
