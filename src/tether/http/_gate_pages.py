"""A page of gates, as the gates routes ask for one (``GET /approvals``, ``GET /inputs``,
``GET /budgets``): the filters and the cursor every one of them takes, narrowed to what the
request's identity may list (its agents, its tenant), and the status a route names read as
the gate index's.

Each route keeps what is its own (the names its ``status`` takes and what they mean,
``tool`` for approvals, the items it answers); :data:`GatePageDependency` is the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final

from fastapi import Depends, Query

from tether.engine import MAX_APPROVALS_PAGE, ApprovalPage, Runtime
from tether.http._access import IdentityDependency, listed_agent
from tether.store import GateKind, GateStatus

__all__ = ("GatePageDependency", "GatePageQuery", "gate_page_query")

_STATUS: Final[dict[str, GateStatus | None]] = {
    "pending": GateStatus.PENDING,
    "decided": GateStatus.DECIDED,
    "answered": GateStatus.DECIDED,  # an input's decision is its answer
    "closed": GateStatus.CLOSED,
    "all": None,
}
"""A route's ``status`` as the gate index knows it (``all``: no filter)."""


@dataclass(frozen=True, slots=True)
class GatePageQuery:
    """What a gates route's request asks for beside its status: its filters, its page, and
    the tenant whose gates it may see."""

    agent: str | None
    instance: str | None
    limit: int
    cursor: str | None
    tenant: str | None

    async def read(
        self, runtime: Runtime, kind: GateKind, status: str, *, tool: str | None = None
    ) -> ApprovalPage:
        """The page of ``kind`` gates in ``status`` (a route's name for it) it asks for."""
        asked: dict[str, Any] = {
            "status": _STATUS[status],
            "agent": self.agent,
            "instance": self.instance,
            "limit": self.limit,
            "cursor": self.cursor,
            "tenant": self.tenant,
        }
        if kind is GateKind.APPROVAL:
            return await runtime.approvals(**asked, tool=tool)
        if kind is GateKind.INPUT:
            return await runtime.inputs(**asked)
        return await runtime.budget_gates(**asked)


async def gate_page_query(
    identity: IdentityDependency,
    agent: str | None = Query(default=None, max_length=200),
    instance: str | None = Query(default=None, max_length=200),
    limit: int = Query(default=100, ge=1, le=MAX_APPROVALS_PAGE),
    cursor: str | None = Query(
        default=None, max_length=2000, description="A page's nextCursor: the page after it."
    ),
) -> GatePageQuery:
    """The filters and the page of a gates route's query, for ``identity``: an identity of
    one agent lists that agent's (``listed_agent``), a tenant's only its tenant's."""
    return GatePageQuery(
        agent=listed_agent(identity, agent),
        instance=instance,
        limit=limit,
        cursor=cursor,
        tenant=identity.tenant,
    )


GatePageDependency = Annotated[GatePageQuery, Depends(gate_page_query)]
