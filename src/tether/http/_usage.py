"""Spending against budgets: ``GET /usage`` answers what a tenant spent in a UTC day or month
against the budget it spends from then (``RuntimeConfig.tenant_budgets``), or, with
``session=``, what one session spent against its session budget (docs/budgets.md)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError

from tether.errors import TenantNotFound
from tether.http._access import AccessDependency, own_conversation
from tether.http._dependencies import RuntimeDependency
from tether.http._errors import failures
from tether.http._usage_views import session_usage_report, usage_report
from tether.wire import UsageAnswer

__all__ = ("usage_router",)

usage_router = APIRouter(tags=["usage"])
"""A tenant's, or a session's, spending against its budget."""


def _refused(field: str, message: str, value: object = None) -> RequestValidationError:
    """A 422 naming the query parameter at fault, as FastAPI's own validation says it."""
    return RequestValidationError(
        [{"type": "value_error", "loc": ("query", field), "msg": message, "input": value}]
    )


@usage_router.get("/usage", responses=failures(404, 422, 503))
async def usage(
    runtime: RuntimeDependency,
    access: AccessDependency,
    tenant: str | None = Query(
        default=None,
        min_length=1,
        max_length=200,
        description="Whose spending: the caller's own tenant if it has one (another is a 404), "
        "required of an identity of no tenant. Not with ``session``.",
    ),
    session: str | None = Query(
        default=None,
        min_length=1,
        max_length=200,
        description="A session's spending instead, against its session budget: its "
        "conversation id (``conversationId`` in GET /sessions). Another tenant's is a 404.",
    ),
    period: Literal["day", "month"] | None = Query(
        default=None, description="The UTC calendar day (if absent) or month. Not with ``session``."
    ),
    at: Annotated[
        date | None,
        Query(
            description="A day of the period (ISO 8601 date); today if absent. Not with "
            "``session``."
        ),
    ] = None,
) -> UsageAnswer:
    """What ``tenant``'s runs spent in the UTC ``period`` holding ``at`` (model calls,
    tokens, cost, tool calls), its budget of that period (``null``: none) and what is left
    of it (``null`` per limit where it is unlimited). With ``session``: what that session
    spent, all its submissions and their children together, against its session budget,
    and its open submission's spending against its own budget."""
    identity = access.identity
    if session is not None:
        if tenant is not None:
            raise _refused("tenant", "name the tenant or the session, not both", tenant)
        for name, value in (("period", period), ("at", at)):
            if value is not None:
                raise _refused(name, "a session's spending has no period", str(value))
        conversation = await own_conversation(runtime, access, session)
        return UsageAnswer(session_usage_report(await runtime.session_usage(conversation.id)))
    whose = tenant if tenant is not None else identity.tenant
    if whose is None:
        raise RequestValidationError(
            [
                {
                    "type": "missing",
                    "loc": ("query", "tenant"),
                    "msg": "name the tenant (or the session): this identity belongs to none",
                    "input": None,
                }
            ]
        )
    if not identity.sees(whose):
        raise TenantNotFound(whose)
    moment = None if at is None else datetime(at.year, at.month, at.day, tzinfo=UTC)
    spent = await runtime.tenant_usage(whose, period=period or "day", at=moment)
    return UsageAnswer(usage_report(spent))
