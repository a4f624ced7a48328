"""The approval gate: park durably, decide once, resume under the original key."""

from collections.abc import Sequence

import pytest
from pydantic import JsonValue

from tether.errors import (
    ApprovalBlocked,
    ApprovalConflict,
    ApprovalNotFound,
    ApprovalParked,
    InheritedToolIntent,
    InvalidApproval,
    InvalidEditArgs,
    MissingToolExecutor,
)
from tether.journal import Decision, Journal, ToolScope, Turn
from tether.messages import Mediation, ModelRequest, ToolCall, ToolOutcomeStatus
from tether.records import ApprovalDecided, ApprovalRequested, Record, ToolOutcome
from tether.store import SessionKey, Store
from tether.testing import RecordingTools

from .harnesses import LoopHarness, journal, new_conversation, planning_model, user
from .test_exec import kinds
from .test_resume import cut_after

EMAIL = "send_email to bob"


async def park(store: Store, cid: str, tools: RecordingTools | None = None) -> ApprovalParked:
    j = await journal(store, cid, model=planning_model(), tools=tools or RecordingTools())
    with pytest.raises(ApprovalParked) as caught:
        await j.exec(LoopHarness(), [user(EMAIL)])
    return caught.value


async def test_a_gated_call_parks_durably(store: Store) -> None:
    cid = await new_conversation(store)
    tools = RecordingTools()
    parked = await park(store, cid, tools)
    records = await store.read(cid)
    assert kinds(records)[-2:] == ["tool_called", "approval_requested"]
    assert (
        records[-1].seq == parked.request_seq
        and parked.approval_id == f"{cid}.{parked.request_seq}"
    )
    request = records[-1].payload
    assert isinstance(request, ApprovalRequested) and request.args == {"q": EMAIL}
    assert request.args_digest.startswith("sha256:")
    assert not tools.calls


async def test_a_swallowed_park_stays_sealed(store: Store) -> None:
    cid = await new_conversation(store)
    errors: list[str] = []

    class Swallow:
        name, version = "swallow", "1"

        async def run(self, turn: Turn) -> JsonValue:
            gated = ToolCall(
                call_id="g", name="send_email", idempotency_key="k", mediation=Mediation.APPROVAL
            )
            for call in (
                turn.tool(gated),
                turn.model(ModelRequest(model="m", messages=())),
                turn.tool(ToolCall(call_id="h", name="lookup", idempotency_key="k2")),
                turn.steering(),
            ):
                try:
                    await call
                except ApprovalParked as exc:
                    errors.append(type(exc).__name__)
            return "pretending to be done"

    with pytest.raises(ApprovalParked):
        await (await journal(store, cid, tools=RecordingTools())).exec(Swallow(), [])
    assert errors == ["ApprovalParked"] * 4
    assert kinds(await store.read(cid))[-1] == "approval_requested"


async def test_exec_is_blocked_while_a_gate_is_open(store: Store) -> None:
    cid = await new_conversation(store)
    await park(store, cid)
    with pytest.raises(ApprovalBlocked):
        await (await journal(store, cid)).exec(LoopHarness(), [user("anything")])


async def test_resuming_a_pending_gate_is_cheap_and_idempotent(store: Store) -> None:
    cid = await new_conversation(store)
    parked = await park(store, cid)
    head = await store.head(cid)
    for _ in range(2):
        with pytest.raises(ApprovalParked) as caught:
            await (await journal(store, cid)).resume(LoopHarness())
        assert caught.value.approval_id == parked.approval_id
    assert await store.head(cid) == head


async def test_a_cut_between_call_and_request_is_repaired_once(store: Store) -> None:
    cid = await new_conversation(store)
    await park(store, cid)
    cut = await cut_after(store, cid, "tool_called")
    for _ in range(2):
        with pytest.raises(ApprovalParked):
            await (await journal(cut, cid)).resume(LoopHarness())
    assert kinds(await cut.read(cid)).count("approval_requested") == 1


async def test_inspect_follows_the_gate(store: Store) -> None:
    cid = await new_conversation(store)
    parked = await park(store, cid)
    j = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    state = await j.inspect_approval()
    assert (
        state is not None and state.status == "pending" and state.approval_id == parked.approval_id
    )
    assert state.tool_call.tool == "send_email" and not state.inherited and not state.completed
    await j.approve(parked.approval_id, "approve", approver="ann")
    assert (state := await j.inspect_approval()) is not None and state.status == "decided"
    await j.resume(LoopHarness())
    state = await j.inspect_approval()
    assert state is not None and state.status == "completed" and state.completed


async def test_approve_is_idempotent_and_final(store: Store) -> None:
    cid = await new_conversation(store)
    parked = await park(store, cid)
    j = await journal(store, cid)
    first = await j.approve(parked.approval_id, "reject", approver="ann", reason="not today")
    assert first.seq == parked.request_seq + 1
    decided = first.payload
    assert isinstance(decided, ApprovalDecided) and decided.decision == "reject"
    head = await store.head(cid)
    again = await (await journal(store, cid)).approve(
        parked.approval_id, "reject", approver="ann", reason="not today"
    )
    assert again == first and await store.head(cid) == head
    others: list[tuple[Decision, str, str]] = [
        ("approve", "ann", "not today"),
        ("reject", "bob", "not today"),
        ("reject", "ann", "later"),
    ]
    for other in others:
        with pytest.raises(ApprovalConflict):
            await j.approve(parked.approval_id, other[0], approver=other[1], reason=other[2])
    with pytest.raises(ApprovalNotFound):
        await j.approve("nope", "approve", approver="ann")
    with pytest.raises(InvalidEditArgs):
        await j.approve(parked.approval_id, "edit", approver="ann")
    with pytest.raises(InvalidEditArgs):
        await j.approve(parked.approval_id, "reject", approver="ann", args={"to": "x"})


async def test_a_decision_is_no_writers_turn(store: Store) -> None:
    """A decision commits at the conversation's current fence, whatever its approver holds:
    it supersedes no writer, so the journal holding the fence resumes right after it."""
    cid = await new_conversation(store)
    parked = await park(store, cid)
    approver = await Journal.open(store, cid, fence=0)  # as Runtime.approve opens it
    holder = await journal(store, cid, model=planning_model(), tools=RecordingTools())
    await approver.approve(parked.approval_id, "approve", approver="ann")
    result = await holder.resume(LoopHarness())
    assert result.output == "done after 1 tool results"


async def decide_and_resume(
    store: Store,
    cid: str,
    decision: Decision,
    *,
    reason: str | None = None,
    args: dict[str, JsonValue] | None = None,
) -> tuple[JsonValue, list[Record], RecordingTools]:
    parked = await park(store, cid)
    await (await journal(store, cid)).approve(
        parked.approval_id, decision, approver="ann", reason=reason, args=args
    )
    tools = RecordingTools()
    result = await (await journal(store, cid, model=planning_model(), tools=tools)).resume(
        LoopHarness()
    )
    return result.output, await store.read(cid), tools


def outcome(records: Sequence[Record]) -> ToolOutcome:
    payload = next(r.payload for r in records if r.kind == "tool_outcome")
    assert isinstance(payload, ToolOutcome)
    return payload


async def test_approved_runs_the_recorded_call(store: Store) -> None:
    cid = await new_conversation(store)
    output, records, tools = await decide_and_resume(store, cid, "approve")
    assert output == "done after 1 tool results"
    assert [call.args for call in tools.calls] == [{"q": EMAIL}]
    assert outcome(records).status is ToolOutcomeStatus.OK
    assert await (await Journal.open(store, cid, fence=0)).replay(LoopHarness()) == [output]
    await (await journal(store, cid, model=planning_model())).exec(LoopHarness(), [user("thanks")])


async def test_rejected_never_runs_the_tool(store: Store) -> None:
    cid = await new_conversation(store)
    output, records, tools = await decide_and_resume(store, cid, "reject", reason="spam")
    assert not tools.calls and output == "done after 1 tool results"
    denied = outcome(records)
    assert (
        denied.status is ToolOutcomeStatus.DENIED and denied.is_error and "spam" in denied.content
    )


async def test_edited_args_are_what_runs(store: Store) -> None:
    cid = await new_conversation(store)
    _, records, tools = await decide_and_resume(
        store, cid, "edit", args={"q": "send_email to carol"}
    )
    assert [call.args for call in tools.calls] == [{"q": "send_email to carol"}]
    assert outcome(records).status is ToolOutcomeStatus.OK


async def test_executor_failure_is_an_error_receipt(store: Store) -> None:
    cid = await new_conversation(store)
    parked = await park(store, cid)
    await (await journal(store, cid)).approve(parked.approval_id, "approve", approver="ann")

    async def smtp_down(call: ToolCall, scope: ToolScope) -> JsonValue:
        raise ConnectionError("smtp down")

    tools = RecordingTools({"send_email": smtp_down})
    result = await (await journal(store, cid, model=planning_model(), tools=tools)).resume(
        LoopHarness()
    )
    assert result.output == "done after 1 tool results"
    receipt = outcome(await store.read(cid))
    assert receipt.status is ToolOutcomeStatus.ERROR and "smtp down" in receipt.content


async def test_missing_executor_leaves_the_gate_recoverable(store: Store) -> None:
    cid = await new_conversation(store)
    parked = await park(store, cid)
    await (await journal(store, cid)).approve(parked.approval_id, "approve", approver="ann")
    with pytest.raises(MissingToolExecutor):
        await (await journal(store, cid, model=planning_model())).resume(LoopHarness())
    assert "tool_outcome" not in kinds(await store.read(cid))
    tools = RecordingTools()
    await (await journal(store, cid, model=planning_model(), tools=tools)).resume(LoopHarness())
    assert len(tools.calls) == 1


async def test_effect_before_receipt_is_deduplicated(store: Store) -> None:
    cid = await new_conversation(store)
    parked = await park(store, cid)
    await (await journal(store, cid)).approve(parked.approval_id, "approve", approver="ann")
    tools = RecordingTools()
    await (await journal(store, cid, model=planning_model(), tools=tools)).resume(LoopHarness())
    cut = await cut_after(
        store, cid, "approval_decided"
    )  # crashed after the effect, before its receipt
    await (await journal(cut, cid, model=planning_model(), tools=tools)).resume(LoopHarness())
    [key] = tools.executions
    assert tools.executions[key] == 2 and len(tools.effects) == 1


async def test_an_approved_call_cut_while_running_is_not_run_again(store: Store) -> None:
    """A call not declared idempotent, approved, marks its run durable before it starts: a
    crash during the run ends in an unknown outcome, never a second run (a crash before the
    mark still runs it: see the test above)."""
    cid = await new_conversation(store)
    parked = await park(store, cid)
    await (await journal(store, cid)).approve(parked.approval_id, "approve", approver="ann")
    tools = RecordingTools()
    await (await journal(store, cid, model=planning_model(), tools=tools)).resume(LoopHarness())
    records = await store.read(cid)
    [marked] = [r for r in records if r.kind == "step_recorded"]
    assert marked.payload.name == "tether.approved_run"  # type: ignore[attr-defined]
    cut = await cut_after(store, cid, "step_recorded")  # crashed while the tool ran
    again = RecordingTools()
    result = await (await journal(cut, cid, model=planning_model(), tools=again)).resume(
        LoopHarness()
    )
    assert not again.calls and result.output == "done after 1 tool results"
    assert outcome(await cut.read(cid)).status is ToolOutcomeStatus.UNKNOWN
    assert await (await Journal.open(cut, cid, fence=0)).replay(LoopHarness()) == [result.output]


async def test_a_fork_child_cannot_decide_or_resume_an_inherited_gate(store: Store) -> None:
    cid = await new_conversation(store)
    parked = await park(store, cid)
    child = await (await journal(store, cid)).fork(
        parked.request_seq, SessionKey("agent", "inst", "child")
    )
    child_journal = await journal(store, child.id, model=planning_model(), tools=RecordingTools())
    state = await child_journal.inspect_approval()
    assert state is not None and state.inherited
    with pytest.raises(InvalidApproval):
        await child_journal.approve(parked.approval_id, "approve", approver="ann")
    with pytest.raises(InheritedToolIntent):
        await child_journal.resume(LoopHarness())
    result = await child_journal.exec(LoopHarness(), [user("just say hi")])  # the escape
    assert result.output == "echo: just say hi"


async def test_the_next_live_tail_can_gate_again(store: Store) -> None:
    cid = await new_conversation(store)
    await decide_and_resume(store, cid, "approve")
    second = await park(store, cid)
    assert second.request_seq > 0
    with pytest.raises(ApprovalBlocked):
        await (await journal(store, cid)).exec(LoopHarness(), [user("x")])
