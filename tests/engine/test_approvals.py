"""Approvals in the engine: a decision and the wake-up of the run it unblocks are one commit,
however an approver races the park or dies; abort reaches parked work; a park costs no
attempt; concurrent decisions agree; edits fit the tool's schema."""

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from pydantic import JsonValue

from tether.engine import AgentDefinition, ApprovalPage, Receipt, Runtime, SystemClock
from tether.errors import ApprovalConflict, InvalidApproval, InvalidCursor, InvalidEditArgs
from tether.journal import Journal, Turn
from tether.messages import Mediation, ModelRequest, ToolCall, ToolOutcomeStatus, ToolSpec
from tether.models import ScriptedModel
from tether.records import ApprovalDecided, ApprovalRequested, Record, RecordDraft, ToolOutcome
from tether.store import GateStatus, Store, SubmissionStatus
from tether.testing import RecordingTools

from .agents import agent
from .conftest import FAST
from .test_control import wait_for_status
from .test_runtime import settle

Make = Callable[..., Runtime]

EMAIL = ToolSpec(
    name="send_email",
    mediation=Mediation.APPROVAL,
    parameters={
        "type": "object",
        "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
        "required": ["to"],
        "additionalProperties": False,
    },
)


class Gates:
    """Offers the model the gated tool once, then sends ``count`` emails in a row, each
    waiting for approval; returns what each send answered."""

    name, version = "gates", "1"

    def __init__(self, count: int) -> None:
        self.count = count

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="test", messages=(*turn.history, *turn.inputs), tools=(EMAIL,))
        await turn.model(request)
        answers: list[JsonValue] = []
        for n in range(self.count):
            result = await turn.tool(
                ToolCall(
                    call_id=f"mail-{n}",
                    name="send_email",
                    args={"to": f"bob{n}@example.com"},
                    idempotency_key=f"{turn.execution_id}:mail-{n}",
                    mediation=Mediation.APPROVAL,
                )
            )
            answers.append(result.content)
        return answers


def gates_agent(
    count: int = 1, tools: RecordingTools | None = None, **policy: Any
) -> AgentDefinition:
    return agent(
        Gates(count), ScriptedModel(lambda request: "ok"), tools or RecordingTools(), **policy
    )


async def pending_gate(runtime: Runtime, store: Store, receipt: Receipt) -> str:
    """The approval id of the gate the submission is parked on, once it is parked."""
    await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
    state = await (await Journal.open(store, receipt.conversation_id, fence=0)).inspect_approval()
    assert state is not None and state.approval_id is not None and state.status == "pending"
    return state.approval_id


def deciding_store(store: Store, decide: Callable[[Record], Awaitable[Record]]) -> Store:
    """``store``, but each append that makes an approval request durable has ``decide`` decide
    it before the append returns: before the attempt that asked can park."""

    class DecidingStore:  # a class per store: protocol checks are cached per class
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        async def append(
            self,
            conversation_id: str,
            drafts: Sequence[RecordDraft],
            *,
            expected_seq: int,
            fence: int,
        ) -> list[Record]:
            records = await store.append(
                conversation_id, drafts, expected_seq=expected_seq, fence=fence
            )
            for record in records:
                if record.kind == ApprovalRequested.KIND:
                    await decide(record)
            return records

    return DecidingStore()


async def test_a_decision_made_before_the_park_is_not_lost(store: Store) -> None:
    """The approver decides while the run that asked is still running (the request is
    durable, the park is not): the park finds the head moved, hands the claim back, and the
    run resumes with the decision instead of parking for good."""
    decided: list[Record] = []
    runtime: Runtime | None = None

    async def decide(request: Record) -> Record:
        assert runtime is not None
        payload = request.payload
        assert isinstance(payload, ApprovalRequested)
        submission = await runtime.store.get_submission(str(request.submission_id))
        assert submission.status is SubmissionStatus.RUNNING  # the race, every time
        decided.append(await runtime.approve(payload.approval_id, "approve", approver="ann"))
        return decided[-1]

    tools = RecordingTools()
    runtime = Runtime({"mail": gates_agent(2, tools)}, deciding_store(store, decide), **FAST)
    async with runtime:
        receipt = await runtime.dispatch("mail", "acme", "send them")
        outcome = await settle(runtime, receipt.submission_id)
        assert outcome["status"] == "succeeded", outcome
        assert len(decided) == 2 and [c.args["to"] for c in tools.calls] == [
            "bob0@example.com",
            "bob1@example.com",
        ]
        info = await runtime.submission(receipt.submission_id)
        assert info.submission.attempt_count == 1  # the handed-back claims were refunded


async def test_parks_do_not_use_the_attempt_budget(make_runtime: Make, store: Store) -> None:
    """Four approvals on a budget of three attempts: only attempts that fail or are lost
    count, and waiting for a human is neither."""
    tools = RecordingTools()
    async with make_runtime({"mail": gates_agent(4, tools, max_attempts=3)}) as runtime:
        receipt = await runtime.dispatch("mail", "acme", "send four")
        for _ in range(4):
            await runtime.approve(
                await pending_gate(runtime, store, receipt), "approve", approver="ann"
            )
        outcome = await settle(runtime, receipt.submission_id)
        assert outcome["status"] == "succeeded", outcome
        assert len(tools.calls) == 4
        info = await runtime.submission(receipt.submission_id)
        assert len(info.attempts) == 5 and info.submission.attempt_count == 1
        # Nothing waits; the four decisions page in request order, and the last page says so.
        assert (await runtime.approvals()) == ApprovalPage((), None)
        first = await runtime.approvals(status=GateStatus.DECIDED, agent="mail", limit=3)
        assert len(first.gates) == 3 and first.next_cursor == first.gates[-1].cursor
        rest = await runtime.approvals(status=GateStatus.DECIDED, cursor=first.next_cursor)
        decided = [*first.gates, *rest.gates]
        assert rest.next_cursor is None and [g.call_id for g in decided] == [
            f"mail-{n}" for n in range(4)
        ]
        assert {(g.approver, g.decision, g.submission_id) for g in decided} == {
            ("ann", "approve", receipt.submission_id)
        }
        with pytest.raises(InvalidCursor):
            await runtime.approvals(cursor="not-a-cursor")
        with pytest.raises(ValueError):
            await runtime.approvals(limit=1001)


async def test_abort_settles_a_parked_session_and_closes_its_gate(
    make_runtime: Make, store: Store
) -> None:
    tools = RecordingTools()
    async with make_runtime({"mail": gates_agent(1, tools)}) as runtime:
        parked = await runtime.dispatch("mail", "acme", "send it")
        behind = await runtime.dispatch("mail", "acme", "and this")
        approval_id = await pending_gate(runtime, store, parked)
        assert set(await runtime.abort("mail", "acme")) == {
            parked.submission_id,
            behind.submission_id,
        }
        first = await settle(runtime, parked.submission_id)
        assert first == {
            "status": "aborted",
            "error": "aborted while waiting for approval",
            "errorCode": "aborted",
        }
        second = await settle(runtime, behind.submission_id)
        assert second["status"] == "aborted" and second["errorCode"] == "aborted"
        # The gate is closed: its call has an outcome, so it can no longer be decided.
        with pytest.raises(InvalidApproval):
            await runtime.approve(approval_id, "approve", approver="ann")
        records = await runtime.records(parked.conversation_id)
        [closing] = [r for r in records if r.kind == ToolOutcome.KIND]
        assert isinstance(closing.payload, ToolOutcome)
        assert closing.payload.status is ToolOutcomeStatus.DENIED and closing.payload.is_error
        assert records[closing.seq].kind == "submission_settled"  # in the settlement's commit
        state = await (
            await Journal.open(store, parked.conversation_id, fence=0)
        ).inspect_approval()
        assert state is not None and state.status == "completed"
        assert not tools.calls
        # Nor does it block the session: the next message runs (and parks on its own gate).
        again = await runtime.dispatch("mail", "acme", "try again")
        assert await pending_gate(runtime, store, again) != approval_id
        [closed] = (await runtime.approvals(status=GateStatus.CLOSED)).gates
        assert (closed.approval_id, closed.decision) == (approval_id, None)
        assert closed.closed_at is not None and closed.closed_at >= closed.requested_at
        [waiting] = (await runtime.approvals()).gates
        assert waiting.submission_id == again.submission_id


async def test_concurrent_decisions_agree(make_runtime: Make, store: Store) -> None:
    """Identical decisions racing each other, from several runtimes, all get the one record
    written; a different decision gets ApprovalConflict, whichever order they land in.

    Real time: on PostgreSQL a decision that lands while its run still parks is found by the
    worker's claim tick, which a manual clock never moves."""
    async with make_runtime({"mail": gates_agent(2)}, clock=SystemClock()) as runtime:
        apis = [make_runtime({}, clock=SystemClock()) for _ in range(4)]
        for api in apis:
            await api.start(worker=False)
        deciders = [runtime, *apis]
        receipt = await runtime.dispatch("mail", "acme", "send two")
        first = await pending_gate(runtime, store, receipt)
        same = await asyncio.gather(
            *(d.approve(first, "approve", approver="ann") for d in deciders)
        )
        assert len({(r.seq, r.hash) for r in same}) == 1
        with pytest.raises(ApprovalConflict):
            await apis[0].approve(first, "reject", approver="bob")
        second = await pending_gate(runtime, store, receipt)
        choices = list(itertools.islice(itertools.cycle(("approve", "reject")), 6))
        mixed = await asyncio.gather(
            *(
                deciders[n % len(deciders)].approve(second, choice, approver="ann")  # type: ignore[arg-type]
                for n, choice in enumerate(choices)
            ),
            return_exceptions=True,
        )
        won = [r for r in mixed if isinstance(r, Record)]
        lost = [r for r in mixed if not isinstance(r, Record)]
        assert won and len({(r.seq, r.hash) for r in won}) == 1
        assert all(isinstance(error, ApprovalConflict) for error in lost), lost
        assert len(won) == 3 and len(lost) == 3  # three of each: one kind won, whole
        outcome = await settle(runtime, receipt.submission_id)
        assert outcome["status"] == "succeeded"
        kinds = [r.kind for r in await runtime.records(receipt.conversation_id)]
        assert kinds.count("approval_decided") == 2


async def test_an_edit_must_fit_the_tools_schema(make_runtime: Make, store: Store) -> None:
    tools = RecordingTools()
    async with make_runtime({"mail": gates_agent(1, tools)}) as runtime:
        receipt = await runtime.dispatch("mail", "acme", "send it")
        approval_id = await pending_gate(runtime, store, receipt)
        records = await runtime.records(receipt.conversation_id)
        request = records[-1].payload
        assert isinstance(request, ApprovalRequested) and request.parameters == EMAIL.parameters
        refusals: list[tuple[dict[str, JsonValue], str]] = [
            ({"to": 5}, "args.to"),
            ({"text": "no recipient"}, "args"),
            ({"to": "x@example.com", "cc": "y@example.com"}, "args"),
        ]
        for args, field in refusals:
            with pytest.raises(InvalidEditArgs) as refused:
                await runtime.approve(approval_id, "edit", approver="ann", args=args)
            assert refused.value.field == field
        assert await runtime.records(receipt.conversation_id) == records  # nothing written
        assert (await runtime.submission(receipt.submission_id)).status is SubmissionStatus.WAITING
        await runtime.approve(approval_id, "edit", approver="ann", args={"to": "carol@example.com"})
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"
        assert [call.args for call in tools.calls] == [{"to": "carol@example.com"}]


async def decide_behind_the_runtime(store: Store, approval_id: str) -> None:
    """Write a decision the way an earlier version did before it died: the decision alone,
    the parked submission left waiting (it requeued it in a second commit)."""
    cid = approval_id.rpartition(".")[0]
    request = next(
        r
        for r in await store.read(cid)
        if isinstance(r.payload, ApprovalRequested) and r.payload.approval_id == approval_id
    )
    assert isinstance(request.payload, ApprovalRequested)
    decided = ApprovalDecided(
        approval_id=approval_id, call_id=request.payload.call_id, decision="approve", approver="ann"
    )
    draft = RecordDraft(
        decided, submission_id=request.submission_id, execution_id=request.execution_id
    )
    fence = await store.mint_fence(cid)
    await store.append(cid, [draft], expected_seq=await store.head(cid), fence=fence)


async def test_waits_an_earlier_version_stranded_are_requeued_at_start(
    make_runtime: Make, store: Store
) -> None:
    """A store an earlier version left with a decided gate whose run still waits: the
    runtime's start requeues it (and leaves a gate that waits for a decision waiting)."""
    tools = RecordingTools()
    async with make_runtime({"mail": gates_agent(1, tools)}) as runtime:
        decided = await runtime.dispatch("mail", "acme", "send it", session="decided")
        pending = await runtime.dispatch("mail", "acme", "send it", session="pending")
        approval_id = await pending_gate(runtime, store, decided)
        await pending_gate(runtime, store, pending)
    await decide_behind_the_runtime(store, approval_id)
    assert (await store.get_submission(decided.submission_id)).status is SubmissionStatus.WAITING
    async with make_runtime({"mail": gates_agent(1, tools)}) as runtime:
        assert (await settle(runtime, decided.submission_id))["status"] == "succeeded"
        assert len(tools.calls) == 1
        info = await runtime.submission(pending.submission_id)
        assert info.status is SubmissionStatus.WAITING and len(info.attempts) == 1


async def test_repeating_a_stranded_decision_requeues_its_run(
    make_runtime: Make, store: Store
) -> None:
    async with make_runtime({"mail": gates_agent()}) as runtime:
        receipt = await runtime.dispatch("mail", "acme", "send it")
        approval_id = await pending_gate(runtime, store, receipt)
        await decide_behind_the_runtime(store, approval_id)
        status = (await runtime.submission(receipt.submission_id)).status
        assert status is SubmissionStatus.WAITING
        await runtime.approve(approval_id, "approve", approver="ann")
        assert (await settle(runtime, receipt.submission_id))["status"] == "succeeded"


async def test_abort_after_the_decision_before_the_run_resumed(
    make_runtime: Make, store: Store
) -> None:
    """Decided but not yet resumed (no worker is up): an abort settles it before the approved
    tool runs, and closes the gate."""
    tools = RecordingTools()
    async with make_runtime({"mail": gates_agent(1, tools)}) as runtime:
        receipt = await runtime.dispatch("mail", "acme", "send it")
        approval_id = await pending_gate(runtime, store, receipt)
    api = make_runtime({})
    await api.start(worker=False)
    await api.approve(approval_id, "approve", approver="ann")
    assert await api.abort("mail", "acme") == [receipt.submission_id]
    async with make_runtime({"mail": gates_agent(1, tools)}) as runtime:
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["error"] == "aborted before its approved tool call ran"
    assert not tools.calls
    state = await (await Journal.open(store, receipt.conversation_id, fence=0)).inspect_approval()
    assert state is not None and state.status == "completed"
    # The decision was made: the audit keeps it as decided (closing an undecided gate only).
    [gate] = (await api.approvals(status=None)).gates
    assert (gate.approval_id, gate.status, gate.approver) == (
        approval_id,
        GateStatus.DECIDED,
        "ann",
    )
