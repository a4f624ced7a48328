"""``/healthz`` (the process answers) and ``/readyz`` (its store takes writes). Both are open
when auth is on, and answer whatever the ``Host``: a load balancer asks them without a token,
naming whatever address it probes."""

from __future__ import annotations

import logging

from fastapi import APIRouter
from fastapi.responses import Response

from tether.errors import RuntimeClosed, StoreUnavailable
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import ApiError, failures, internal_error_response
from tether.http._responses import Alive, Ready, respond

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
    """Readiness: a heartbeat write commits (503 ``not_ready`` when the store cannot
    take it, e.g. on a full disk, or while the runtime closes; why is in the server's
    log, not in the answer, which anyone may ask for)."""
    try:
        await runtime.ready()  # a write that commits: a full disk is not ready
    except StoreUnavailable as exc:
        logger.warning("not ready: the store cannot write: %s", exc)
        raise ApiError(503, "not_ready", "the store cannot write (the log says why)") from None
    except RuntimeClosed:
        raise ApiError(503, "not_ready", "the server is stopping") from None
    except Exception:
        # A defect of Tether's, not a state to wait out (a load balancer would take the
        # node out and put it back forever): its traceback goes to the log only.
        logger.exception("GET /readyz failed")
        return internal_error_response()
    return respond(Ready(ready=True))
