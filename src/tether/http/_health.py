"""``/healthz`` (the process answers) and ``/readyz`` (its store takes writes). Both are open
when auth is on: a load balancer asks them without a token."""

from __future__ import annotations

from fastapi import APIRouter

from tether.engine import Runtime
from tether.http._errors import ApiError, failures
from tether.http._responses import Alive, Ready

__all__ = ("health_router",)


def health_router(runtime: Runtime) -> APIRouter:
    """Liveness and readiness, open whatever the auth."""
    router = APIRouter(tags=["health"])

    @router.get("/healthz", responses=failures())
    async def healthz() -> Alive:
        """Liveness: the server answers."""
        return Alive(ok=True)

    @router.get("/readyz", responses=failures(503))
    async def readyz() -> Ready:
        """Readiness: a heartbeat write commits (503 ``not_ready`` when it cannot, e.g. on
        a full disk)."""
        try:
            await runtime.ready()  # a write that commits: a full disk is not ready
        except Exception as exc:
            raise ApiError(503, "not_ready", f"the store cannot write: {exc}") from None
        return Ready(ready=True)

    return router
