"""The approvals inbox and its audit trail: pages of the store's gate index."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tether.store import Gate, GateStatus, Store

__all__ = ("MAX_APPROVALS_PAGE", "ApprovalPage", "approval_page")

MAX_APPROVALS_PAGE: Final = 1000


@dataclass(frozen=True, slots=True)
class ApprovalPage:
    """One page of approval gates, oldest request first, and where the next one starts.

    Example::

        page = await runtime.approvals(status=GateStatus.DECIDED, agent="support")
        while True:
            for gate in page.gates:
                print(gate.approval_id, gate.decision, gate.approver, gate.decided_at)
            if page.next_cursor is None:
                break
            page = await runtime.approvals(
                status=GateStatus.DECIDED, agent="support", cursor=page.next_cursor
            )
    """

    gates: tuple[Gate, ...]
    next_cursor: str | None
    """The ``cursor`` of the page after this one; ``None`` when no gate follows."""


async def approval_page(
    store: Store,
    *,
    status: GateStatus | None,
    agent: str | None,
    instance: str | None,
    tool: str | None,
    limit: int,
    cursor: str | None,
) -> ApprovalPage:
    """Up to ``limit`` gates past ``cursor``; one more is read to tell whether a page follows,
    so ``next_cursor`` never leads to an empty page."""
    if not 1 <= limit <= MAX_APPROVALS_PAGE:
        raise ValueError(f"limit must be 1..{MAX_APPROVALS_PAGE}, got {limit}")
    gates = await store.list_gates(
        status=status, agent=agent, instance=instance, tool=tool, limit=limit + 1, after=cursor
    )
    page = tuple(gates[:limit])
    return ApprovalPage(page, page[-1].cursor if len(gates) > limit else None)
