"""Budget gates in a log: finding the request a gate id names, and whether it can still be
decided (``budget_requested`` / ``budget_decided``; docs/budgets.md)."""

from __future__ import annotations

from collections.abc import Sequence

from tether._canonical import canonical_json
from tether.errors import ApprovalConflict, ApprovalNotFound, InvalidApproval
from tether.records import Actor, BudgetDecided, BudgetRequested, Record, SubmissionSettled

__all__ = ("find_budget_decision",)


def find_budget_decision(
    records: Sequence[Record],
    gate_id: str,
    decided: BudgetDecided,
    *,
    by: Actor | None,
) -> tuple[Record, Record | None]:
    """The request ``gate_id`` names, and the decision already recorded if it is the same
    as ``decided``.

    Raises ``ApprovalNotFound`` for an unknown id, ``ApprovalConflict`` if it was decided
    otherwise (decisions are final; repeating one is idempotent) and ``InvalidApproval`` if
    its submission settled before anyone decided (aborted, timed out)."""
    request = next(
        (
            record
            for record in records
            if isinstance(record.payload, BudgetRequested) and record.payload.gate_id == gate_id
        ),
        None,
    )
    if request is None:
        raise ApprovalNotFound(gate_id)
    wanted = canonical_json(decided.model_copy(update={"by": by}).to_json_object())
    for record in records:
        if record.seq <= request.seq:
            continue
        payload = record.payload
        if isinstance(payload, BudgetDecided) and payload.gate_id == gate_id:
            if canonical_json(payload.to_json_object()) != wanted:
                raise ApprovalConflict(
                    f"budget gate {gate_id} was already decided ({payload.decision}) by "
                    f"{payload.approver}; decisions are final"
                )
            return request, record
        if isinstance(payload, SubmissionSettled) and record.submission_id == request.submission_id:
            raise InvalidApproval(f"budget gate {gate_id}: its submission already settled")
    return request, None
