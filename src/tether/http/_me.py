"""``GET /me``: who the server takes the caller for, and what they may do (the console shows
only the controls its identity may use)."""

from __future__ import annotations

from fastapi import APIRouter

from tether.auth import ALL_SCOPES
from tether.http._access import IdentityDependency
from tether.wire import IdentityView

__all__ = ("me_router",)

me_router = APIRouter(tags=["auth"])


@me_router.get("/me")
async def me(identity: IdentityDependency) -> IdentityView:
    """The caller's identity, their scopes and agents: any valid credential may ask."""
    return IdentityView(
        subject=identity.subject,
        tenant=identity.tenant,
        display=identity.display,
        scopes=[scope for scope in ALL_SCOPES if scope in identity.scopes],
        agents=None if identity.agents is None else sorted(identity.agents),
    )
