"""Conformance cases for budget gates (``GateStore.list_gates(kind=GateKind.BUDGET)``): a
``budget_requested`` opens a gate of kind ``budget`` (no tool call: ``tool`` is ``budget``, its
``args`` what was spent), ``budget_decided`` decides it with the extension as the edited
arguments, and its submission's ``submission_settled`` closes it while still pending."""

from __future__ import annotations

from pydantic import JsonValue

from tether.messages import args_digest
from tether.records import (
    BudgetDecided,
    BudgetRequested,
    Payload,
    RecordDraft,
    SubmissionSettled,
    format_time,
)
from tether.store import GateKind, GateStatus
from tether.testing.storetest._base import BaseConformance, CompleteStore, Fixtures, case, needs
from tether.testing.storetest._gates import Writer

__all__ = ("BudgetGateCases",)

SPENT: dict[str, JsonValue] = {"modelCalls": 2, "tokens": 10, "costUsd": None, "toolCalls": 2}


class _Spender(Writer):
    """Writes budget records as the engine and ``Runtime.decide_budget`` do: outside any
    execution, with the submission's id."""

    async def ask(self, cid: str, *, sub: str = "sub-1", at: float = 0) -> str:
        head = await self.store.head(cid)
        gate_id = f"{cid}.{head + 1}"
        requested = BudgetRequested(
            gate_id=gate_id,
            limit="modelCalls",
            used=2,
            max=2,
            spent=SPENT,
            budget={"modelCalls": 2, "onExhausted": "park"},
        )
        await self.store.append(
            cid, [self.outside(requested, at=at, sub=sub)], expected_seq=head, fence=0
        )
        return gate_id

    def outside(self, payload: Payload, *, at: float, sub: str = "sub-1") -> RecordDraft:
        """A draft of the submission's outside any execution."""
        return RecordDraft(
            payload, id=self.fx.id("rec"), time=format_time(self.fx.at(at)), submission_id=sub
        )


def _args() -> dict[str, JsonValue]:
    return {
        "limit": "modelCalls",
        "used": 2.0,
        "max": 2.0,
        "spent": SPENT,
        "budget": {"modelCalls": 2, "onExhausted": "park"},
        "scope": "submission",
    }


@needs("gates")
class BudgetGateCases(BaseConformance):
    @case
    async def test_a_budget_request_opens_a_budget_gate_and_a_decision_decides_it(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = _Spender(store, fx)
        cid = await fx.conversation()
        gate_id = await w.ask(cid, at=3)
        [gate] = await store.list_gates(kind=GateKind.BUDGET)
        assert (gate.approval_id, gate.kind, gate.status) == (gate_id, GateKind.BUDGET, "pending")
        assert (gate.tool, gate.call_id, gate.submission_id) == ("budget", gate_id, "sub-1")
        assert gate.execution_id is None and gate.requested_at == fx.at(3)
        assert gate.args == _args() and gate.args_digest == args_digest(_args())
        assert await store.list_gates(kind=GateKind.APPROVAL) == []
        assert await store.list_gates(kind=GateKind.INPUT) == []
        decided = BudgetDecided(
            gate_id=gate_id, decision="approve", extension={"modelCalls": 3}, approver="ops"
        )
        await store.append_decision(
            cid, [w.outside(decided, at=5)], expected_seq=await store.head(cid), wake="sub-1"
        )
        [gate] = await store.list_gates(kind=GateKind.BUDGET, status=GateStatus.DECIDED)
        assert (gate.decision, gate.approver, gate.edited_args) == (
            "approve",
            "ops",
            {"modelCalls": 3},
        )
        assert gate.decided_at == fx.at(5)
        assert await store.list_gates(kind=GateKind.BUDGET, status=GateStatus.PENDING) == []

    @case
    async def test_its_submissions_settlement_closes_a_pending_budget_gate(
        self, store: CompleteStore, fx: Fixtures
    ) -> None:
        w = _Spender(store, fx)
        cid = await fx.conversation()
        mine = await w.ask(cid, sub="sub-1", at=1)
        other = await w.ask(cid, sub="sub-2", at=2)
        settled = SubmissionSettled(status="aborted", error="aborted")
        draft = w.outside(settled, at=4)
        await store.append(cid, [draft], expected_seq=await store.head(cid), fence=0)
        gates = {g.approval_id: g for g in await store.list_gates(status=None)}
        assert gates[mine].status is GateStatus.CLOSED and gates[mine].closed_at == fx.at(4)
        assert gates[other].status is GateStatus.PENDING  # another submission's stays open
        pending = await store.list_gates(kind=GateKind.BUDGET, status=GateStatus.PENDING)
        assert [g.approval_id for g in pending] == [other]
