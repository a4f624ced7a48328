"""The inboxes of approvals and inputs, and their audit trail: pages of the store's gate
index."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from tether.engine._observe import Correlation
from tether.errors import ApprovalNotFound, InputNotFound
from tether.journal import NOT_MINTED, Journal, LogView
from tether.records import Record
from tether.store import (
    Gate,
    GateKind,
    GateStatus,
    GateStore,
    Store,
    StoreCapabilities,
    require_capability,
)

__all__ = (
    "MAX_APPROVALS_PAGE",
    "ApprovalPage",
    "approval_page",
    "gate_correlation",
    "gate_journal",
    "gate_waited",
)

MAX_APPROVALS_PAGE: Final = 1000


@dataclass(frozen=True, slots=True)
class ApprovalPage:
    """One page of gates (approvals or inputs), oldest request first, and where the next
    one starts.

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
    store: GateStore,
    *,
    kind: GateKind,
    status: GateStatus | None,
    agent: str | None,
    instance: str | None,
    tool: str | None,
    limit: int,
    cursor: str | None,
    tenant: str | None = None,
) -> ApprovalPage:
    """Up to ``limit`` gates past ``cursor`` (``tenant``'s only, if given); one more is read
    to tell whether a page follows, so ``next_cursor`` never leads to an empty page."""
    if not 1 <= limit <= MAX_APPROVALS_PAGE:
        raise ValueError(f"limit must be 1..{MAX_APPROVALS_PAGE}, got {limit}")
    gates = await store.list_gates(
        kind=kind,
        status=status,
        agent=agent,
        instance=instance,
        tool=tool,
        limit=limit + 1,
        after=cursor,
        tenant=tenant,
    )
    page = tuple(gates[:limit])
    return ApprovalPage(page, page[-1].cursor if len(gates) > limit else None)


async def gate_journal(
    store: Store,
    capabilities: StoreCapabilities,
    view: Callable[[str], LogView],
    gate_id: str,
    not_found: type[ApprovalNotFound | InputNotFound],
) -> Journal:
    """The journal of the conversation a gate id (``{conversation id}.{seq}``) names
    (``StoreCapabilityMissing`` on a store without gates: no run parks on one there)."""
    require_capability(capabilities.gates, "gates")
    conversation_id, _, _ = gate_id.rpartition(".")
    if not conversation_id:
        raise not_found(gate_id)
    # Not minted: opening must not supersede a run that a decision already resumed; the
    # decision commits at a fence of its own, and only when there is one to write.
    return await Journal.open(
        store,
        conversation_id,
        fence=NOT_MINTED,
        view=view(conversation_id),
        capabilities=capabilities,
    )


def gate_correlation(journal: Journal, record: Record) -> Correlation:
    """Who a decision on a gate concerns, for its engine event."""
    return Correlation(
        journal.conversation.key, journal.conversation.id, record.submission_id or ""
    )


def gate_waited(journal: Journal, gate_id: str, decided: Record) -> float | None:
    """Seconds from a gate's request to its decision, by the two records' times (the gate
    id ends with the request's seq; ``None`` if the view no longer holds the request)."""
    _, _, seq = gate_id.rpartition(".")
    records = journal.view.records
    if not seq.isdigit() or not 1 <= int(seq) <= len(records):
        return None
    request = records[int(seq) - 1]
    if request.seq != int(seq):  # a placeholder for a record retention removed
        return None
    waited = datetime.fromisoformat(decided.time) - datetime.fromisoformat(request.time)
    return max(waited.total_seconds(), 0.0)
