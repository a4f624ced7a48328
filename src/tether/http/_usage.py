"""A tenant's spending: ``GET /usage`` answers what it spent in a UTC day or month against
the budget it spends from then (``RuntimeConfig.tenant_budgets``, docs/budgets.md)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError

from tether.errors import TenantNotFound
from tether.http._access import IdentityDependency
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import failures
from tether.http._usage_views import UsageReport

__all__ = ("usage_router",)

usage_router = APIRouter(tags=["usage"])
"""A tenant's spending against its budget."""


@usage_router.get("/usage", responses=failures(404, 422, 503))
async def tenant_usage(
    runtime: RuntimeDependency,
    identity: IdentityDependency,
    tenant: str | None = Query(
        default=None,
        min_length=1,
        max_length=200,
        description="Whose spending: the caller's own tenant if it has one (another is a 404), "
        "required of an identity of no tenant.",
    ),
    period: Literal["day", "month"] = Query(
        default="day", description="The UTC calendar day or month."
    ),
    at: Annotated[
        date | None,
        Query(description="A day of the period (ISO 8601 date); today if absent."),
    ] = None,
) -> UsageReport:
    """What ``tenant``'s runs spent in the UTC ``period`` holding ``at`` (model calls,
    tokens, cost, tool calls), its budget of that period (``null``: none) and what is left
    of it (``null`` per limit where it is unlimited)."""
    whose = tenant if tenant is not None else identity.tenant
    if whose is None:
        raise RequestValidationError(
            [
                {
                    "type": "missing",
                    "loc": ("query", "tenant"),
                    "msg": "name the tenant: this identity belongs to none",
                    "input": None,
                }
            ]
        )
    if not identity.sees(whose):
        raise TenantNotFound(whose)
    moment = None if at is None else datetime(at.year, at.month, at.day, tzinfo=UTC)
    return UsageReport.of(await runtime.tenant_usage(whose, period=period, at=moment))
