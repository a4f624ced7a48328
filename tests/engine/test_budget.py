"""Per-submission budgets (issue 41, item 1): limits on model calls, tokens, cost and tool
calls, counted from the journal, from each source, across a resume and a subagent tree."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tether.agent import agent_spec, tool
from tether.engine import (
    BUDGET_EXHAUSTED,
    AgentDefinition,
    App,
    Budget,
    BudgetExhausted,
    ManualClock,
    Runtime,
)
from tether.engine._budget import BudgetMeter, effective_budget
from tether.errors import ApprovalConflict, ApprovalNotFound, InvalidApproval, InvalidDispatch
from tether.journal import Journal
from tether.messages import Message, ModelRequest, ModelResponse, TextPart, ToolCallPart, Usage
from tether.models import ScriptedModel, Text, ToolUse
from tether.records import (
    ApprovalDecided,
    ApprovalRequested,
    ExecutionStarted,
    RecordDraft,
    ToolCalled,
    ToolOutcome,
    seal,
)
from tether.store import GateStatus, SqliteStore, Store, SubmissionStatus
from tether.stream import DataContent, StreamTaskMessageFull, project

from ..processes import eventually_awaited, kill, start
from .conftest import FAST
from .test_runtime import settle
from .waits import until_emitted

Make = Callable[..., Runtime]
WORKER = Path(__file__).with_name("budget_crash_worker.py")
ROOT = Path(__file__).resolve().parents[2]


def looping(tools_per_call: int = 1) -> ScriptedModel:
    """A model that never stops: each answer says which step it is on and calls ``lookup``."""

    def reply(request: ModelRequest) -> object:
        step = sum(1 for m in request.messages if m.role == "assistant") + 1
        uses = [
            ToolUse("lookup", {"q": f"{step}-{i}"}, call_id=f"c{step}-{i}")
            for i in range(tools_per_call)
        ]
        return [Text(f"step {step}"), *uses]

    return ScriptedModel(reply)


def costly(input_tokens: int, output_tokens: int) -> ScriptedModel:
    """A looping model reporting the same usage on every call."""

    def reply(request: ModelRequest) -> ModelResponse:
        step = sum(1 for m in request.messages if m.role == "assistant") + 1
        message = Message(
            role="assistant",
            parts=(
                TextPart(text=f"step {step}"),
                ToolCallPart(call_id=f"c{step}", name="lookup", args={"q": str(step)}),
            ),
        )
        usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        return ModelResponse(message=message, usage=usage)

    return ScriptedModel(reply)


@tool
async def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def define(model: ScriptedModel, tools: Any = (lookup,), **policy: Any) -> AgentDefinition:
    spec = agent_spec(model, tools=list(tools))
    return AgentDefinition(lambda instance, env: spec, **policy)


async def _records(store: Store, conversation_id: str) -> list[Any]:
    journal = await Journal.open(store, conversation_id)
    return list(await journal.records())


def _closed(records: list[Any]) -> bool:
    """Every tool call has an outcome: a history a provider accepts."""
    called = {r.payload.call_id for r in records if isinstance(r.payload, ToolCalled)}
    answered = {r.payload.call_id for r in records if isinstance(r.payload, ToolOutcome)}
    return called <= answered


# --- the budget itself --------------------------------------------------------------------


def test_the_most_specific_source_wins_limit_by_limit() -> None:
    app = Budget(model_calls=10, tokens=1000, cost_usd=1.0)
    agent = Budget(model_calls=5, tool_calls=3)
    dispatch = Budget(model_calls=2)
    assert effective_budget(dispatch, agent, app) == Budget(
        model_calls=2, tokens=1000, cost_usd=1.0, tool_calls=3
    )
    assert effective_budget(None, None, None) is None
    assert effective_budget(Budget(), None, None) is None  # nothing limited: no budget


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValidationError):
        Budget(model_calls=-1)
    assert Budget.model_validate({"modelCalls": 5, "costUsd": 0.5}).to_json_object() == {
        "modelCalls": 5,
        "costUsd": 0.5,
    }


# --- enforcement ---------------------------------------------------------------------------


async def test_model_calls_run_out_before_the_next_call(make_runtime: Make, store: Store) -> None:
    model = looping()
    async with make_runtime({"a": define(model)}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=Budget(model_calls=3))
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["status"] == "failed" and outcome["errorCode"] == BUDGET_EXHAUSTED
    assert model.invocations == 3  # the fourth was never asked
    assert outcome["result"] == "step 3"  # the partial answer: its model's last text
    details = outcome["errorDetails"]
    assert isinstance(details, dict)
    assert (details["limit"], details["used"], details["max"]) == ("modelCalls", 3, 3)
    assert "modelCalls used 3 of 3" in str(outcome["error"])
    assert _closed(await _records(store, receipt.conversation_id))


async def test_tokens_run_out(make_runtime: Make) -> None:
    model = costly(100, 50)
    async with make_runtime({"a": define(model)}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget={"tokens": 400})
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
    assert model.invocations == 3  # 150, 300, 450: over once the third was paid for
    details = outcome["errorDetails"]
    assert isinstance(details, dict) and details["limit"] == "tokens" and details["used"] == 450


async def test_cost_runs_out(make_runtime: Make) -> None:
    # An unpriced model's cost is unknown and never counts as spent; the scripted "default"
    # model's name is in the price table at zero, so only a zero budget is exhausted by it.
    model = looping()
    async with make_runtime({"a": define(model)}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget={"costUsd": 0})
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED and model.invocations == 0
    details = outcome["errorDetails"]
    assert isinstance(details, dict) and details["limit"] == "costUsd"


async def test_tool_calls_run_out_and_the_refused_call_gets_an_outcome(
    make_runtime: Make, store: Store
) -> None:
    model = looping(tools_per_call=2)
    async with make_runtime({"a": define(model)}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=Budget(tool_calls=3))
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
    details = outcome["errorDetails"]
    assert isinstance(details, dict)
    assert (details["limit"], details["used"]) == ("toolCalls", 3)
    records = await _records(store, receipt.conversation_id)
    assert _closed(records)  # the fourth call, refused, was closed by the settlement
    ran = [r for r in records if isinstance(r.payload, ToolOutcome) and "found" in str(r.payload)]
    assert len(ran) == 3


async def test_the_agent_and_the_application_set_budgets_too(make_runtime: Make) -> None:
    agents = {
        "capped": define(looping(), budget=Budget(model_calls=2)),
        "free": define(looping()),
    }
    async with make_runtime(agents, budget=Budget(model_calls=1)) as runtime:
        capped = await runtime.dispatch("capped", "acme", "go")
        free = await runtime.dispatch("free", "acme", "go")
        raised = await runtime.dispatch(
            "capped", "acme", "go", session="s2", budget={"modelCalls": 4}
        )
        outcomes = [await settle(runtime, r.submission_id) for r in (capped, free, raised)]
    used = [o["errorDetails"]["used"] for o in outcomes]  # type: ignore[index,call-overload]
    assert used == [2, 1, 4]  # the agent's over the application's, the dispatch's over both


async def test_a_budget_is_stored_with_the_message(make_runtime: Make, store: Store) -> None:
    async with make_runtime({"a": define(looping())}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget={"modelCalls": 1})
        await settle(runtime, receipt.submission_id)
    submission = await store.get_submission(receipt.submission_id)
    assert submission.input["budget"] == {"modelCalls": 1}


async def test_a_bad_budget_is_refused_at_dispatch(make_runtime: Make) -> None:
    async with make_runtime({"a": define(looping())}) as runtime:
        with pytest.raises(InvalidDispatch) as caught:
            await runtime.dispatch("a", "acme", "go", budget={"tokens": -5})
        assert caught.value.field == "budget.tokens"
        with pytest.raises(InvalidDispatch, match="takes no budget"):
            await runtime.dispatch(
                "a", "acme", {"kind": "steer", "body": "x"}, budget={"tokens": 5}
            )


async def test_a_resumed_run_does_not_count_again(make_runtime: Make, store: Store) -> None:
    """A runtime closed while a tool runs hands the run back; another resumes it from the
    journal: the calls the first made count once, and none is bought again."""
    started, release = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        calls.append(q)
        if q == "2-0":
            started.set()
            await release.wait()
        return f"found {q}"

    first_model = looping()
    runtime = make_runtime({"a": define(first_model, tools=(lookup,))})
    await runtime.start()
    receipt = await runtime.dispatch("a", "acme", "go", budget=Budget(model_calls=4))
    await asyncio.wait_for(started.wait(), 60)
    await runtime.close()
    assert (await store.get_submission(receipt.submission_id)).status is SubmissionStatus.QUEUED
    second_model = looping()
    release.set()
    async with make_runtime({"a": define(second_model, tools=(lookup,))}) as again:
        outcome = await settle(again, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
    assert first_model.invocations == 2 and second_model.invocations == 2  # 4 in all
    details = outcome["errorDetails"]
    assert isinstance(details, dict) and details["modelCalls"] == 4


async def test_a_childs_usage_counts_against_its_parent(make_runtime: Make) -> None:
    def parent_reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return "all done"
        return [ToolUse("task", {"agent": "researcher", "prompt": "X"}, call_id="t1")]

    child_model = looping()
    parent_model = ScriptedModel(parent_reply)
    agents = {
        "parent": define(parent_model, tools=()),
        "researcher": define(child_model, budget=Budget(model_calls=3)),
    }
    runtime = make_runtime(agents, subagents={"parent": ["researcher"]})
    await runtime.start()
    receipt = await runtime.dispatch("parent", "acme", "go", budget=Budget(model_calls=3))
    outcome = await settle(runtime, receipt.submission_id)
    # One call of its own spawned the child; the child's three (its own budget ran out) made
    # four in the parent's count, so the parent's second call is never made.
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
    assert parent_model.invocations == 1 and child_model.invocations == 3
    details = outcome["errorDetails"]
    assert isinstance(details, dict) and details["modelCalls"] == 4


async def test_an_app_takes_a_budget_as_a_setting(store: Store) -> None:
    model = looping()
    app = App({"a": define(model)}, budget=Budget(model_calls=2), **FAST)
    async with Runtime.from_app(app, store=store) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go")
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED and model.invocations == 2


@pytest.mark.process
async def test_a_worker_killed_mid_run_is_resumed_without_counting_again(tmp_path: Path) -> None:
    """SIGKILL a worker with two model calls paid for and a tool call recorded but never
    answered; another worker resumes the run from the journal and stops at the budget: the
    calls the dead worker made count once, and the tool call re-driven counts once."""
    log = tmp_path / "calls.log"
    store = await SqliteStore.open(tmp_path)
    api = Runtime({"a": define(looping())}, store)  # admission only: no worker runs here
    await api.start(worker=False)
    receipt = await api.dispatch("a", "acme", "go", budget=Budget(model_calls=4))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (tmp_path / "worker.log").open("ab") as errors:
        worker = start(
            [sys.executable, str(WORKER), str(tmp_path), str(log)], stderr=errors, env=env
        )

    def held() -> bool:
        return log.exists() and "held" in log.read_text().splitlines()

    await eventually_awaited(
        lambda: asyncio.to_thread(held), lambda: (tmp_path / "worker.log").read_text()
    )
    kill(worker)
    assert log.read_text().splitlines().count("model") == 2
    model = looping()
    async with Runtime({"a": define(model)}, store, **FAST) as again:  # the real clock
        outcome = await settle(again, receipt.submission_id)
    await api.close()
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
    assert model.invocations == 2  # 2 + 2: none bought again
    details = outcome["errorDetails"]
    assert isinstance(details, dict)
    assert (details["modelCalls"], details["toolCalls"]) == (4, 4)
    assert _closed(await _records(store, receipt.conversation_id))
    await store.close()


# --- wall time -------------------------------------------------------------------------------


def test_wall_time_is_seconds_on_the_wire() -> None:
    budget = Budget.model_validate({"wallTime": 90})
    assert budget.wall_time == timedelta(seconds=90)
    assert Budget(wall_time=timedelta(minutes=2)).to_json_object() == {"wallTime": 120.0}
    for bad in (-1, "PT5S", 1e30):
        with pytest.raises(ValidationError):
            Budget.model_validate({"wallTime": bad})


async def test_wall_time_runs_out_before_the_next_call(
    make_runtime: Make, clock: ManualClock, store: Store
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        if q == "2-0":
            started.set()
            await release.wait()
        return f"found {q}"

    model = looping()
    async with make_runtime({"a": define(model, tools=(lookup,))}, lease=600) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=Budget(wall_time=60))
        await asyncio.wait_for(started.wait(), 60)
        await clock.advance(61)  # the tool took a minute
        release.set()
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
    assert model.invocations == 2  # the third call came after the minute was up
    details = outcome["errorDetails"]
    assert isinstance(details, dict) and (details["limit"], details["max"]) == ("wallTime", 60)
    assert outcome["result"] == "step 2"
    assert _closed(await _records(store, receipt.conversation_id))


async def test_a_restart_does_not_reset_the_wall_time(
    make_runtime: Make, clock: ManualClock, store: Store
) -> None:
    """The time counts from the submission's first execution as its log recorded it, not
    from when this process (or this attempt) began."""
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        if q == "2-0":
            started.set()
            await release.wait()
        return f"found {q}"

    first_model = looping()
    runtime = make_runtime({"a": define(first_model, tools=(lookup,))})
    await runtime.start()
    receipt = await runtime.dispatch("a", "acme", "go", budget=Budget(wall_time=60))
    await asyncio.wait_for(started.wait(), 60)
    await runtime.close()  # handed back, its tool call unanswered
    release.set()
    await clock.advance(100)  # no process held it meanwhile
    second_model = looping()
    async with make_runtime({"a": define(second_model, tools=(lookup,))}) as again:
        outcome = await settle(again, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
    assert second_model.invocations == 0  # the tool re-ran; no model call after it
    details = outcome["errorDetails"]
    assert isinstance(details, dict) and details["limit"] == "wallTime"
    assert float(details["used"]) >= 60  # type: ignore[arg-type]


def test_the_wait_for_a_person_does_not_count() -> None:
    """The meter takes a gate's request-to-decision time off the wall time (read from the
    records' own times, so a restart in between changes nothing)."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def at(seconds: int) -> str:
        return (t0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")

    drafts = [
        RecordDraft(
            ExecutionStarted(harness="h", harness_version="1", input_count=1),
            submission_id="s1",
            time=at(0),
        ),
        RecordDraft(
            ApprovalRequested(approval_id="g1", call_id="c1", tool="t", args={}, args_digest="d"),
            submission_id="s1",
            time=at(10),
        ),
        RecordDraft(
            ApprovalDecided(approval_id="g1", call_id="c1", decision="approve", approver="x"),
            submission_id="s1",
            time=at(1010),
        ),
    ]
    records = [
        seal(draft, conversation_id="c", session="s", seq=seq, prev_hash="")
        for seq, draft in enumerate(drafts, start=1)
    ]
    meter = BudgetMeter(Budget(wall_time=60), lambda: t0 + timedelta(seconds=1030))
    meter.count_records(records, "s1")
    assert meter.elapsed() == timedelta(seconds=30)  # 1030 less the 1000 it waited
    meter.check("model")  # within its minute
    meter.now = lambda: t0 + timedelta(seconds=1070)
    with pytest.raises(BudgetExhausted) as caught:
        meter.check("tool")
    assert caught.value.details["limit"] == "wallTime"


# --- the budget gate ------------------------------------------------------------------------


async def _parked(runtime: Runtime, store: Store, submission_id: str) -> Any:
    """The pending budget gate of a submission, once it waits on it."""

    async def waiting() -> bool:
        submission = await store.get_submission(submission_id)
        return submission.status is SubmissionStatus.WAITING

    await until_emitted(runtime, waiting)
    [gate] = (await runtime.budget_gates()).gates
    return gate


async def test_a_run_parks_on_a_budget_gate_and_an_approval_extends_it(
    make_runtime: Make, store: Store
) -> None:
    model = looping()
    park = Budget(model_calls=2, on_exhausted="park")
    async with make_runtime({"a": define(model)}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=park)
        gate = await _parked(runtime, store, receipt.submission_id)
        assert model.invocations == 2
        assert (gate.kind, gate.tool, gate.status) == ("budget", "budget", "pending")
        assert (gate.args["limit"], gate.args["used"], gate.args["max"]) == ("modelCalls", 2, 2)
        assert gate.args["spent"]["toolCalls"] == 2
        assert gate.submission_id == receipt.submission_id
        await runtime.decide_budget(
            gate.approval_id, "approve", extension={"modelCalls": 3}, approver="ops"
        )
        gate = await _parked(runtime, store, receipt.submission_id)  # again, at 5
        assert model.invocations == 5 and gate.args["max"] == 5
        [decided] = (await runtime.budget_gates(status=GateStatus.DECIDED)).gates
        assert decided.decision == "approve" and decided.edited_args == {"modelCalls": 3}
        await runtime.decide_budget(gate.approval_id, "reject", approver="ops", reason="enough")
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED and outcome["result"] == "step 5"
    assert model.invocations == 5
    records = await _records(store, receipt.conversation_id)
    assert _closed(records)
    # The canonical stream shows the waits and the decisions (the console, `tether tail`).
    shown = [
        event.content.data
        for event in project(records)
        if isinstance(event, StreamTaskMessageFull) and isinstance(event.content, DataContent)
    ]
    budget = [d for d in shown if str(d.get("kind", "")).startswith("budget_")]
    assert [(d["kind"], d.get("decision")) for d in budget] == [
        ("budget_requested", None),
        ("budget_decided", "approve"),
        ("budget_requested", None),
        ("budget_decided", "reject"),
    ]
    assert budget[0]["limit"] == "modelCalls" and budget[1]["extension"] == {"modelCalls": 3}


async def test_a_budget_decision_is_final_and_checked(make_runtime: Make, store: Store) -> None:
    park = Budget(model_calls=1, on_exhausted="park")
    async with make_runtime({"a": define(looping())}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=park)
        gate = await _parked(runtime, store, receipt.submission_id)
        with pytest.raises(InvalidDispatch) as bad:
            await runtime.decide_budget(
                gate.approval_id, "approve", extension={"modelCalls": -1}, approver="ops"
            )
        assert bad.value.field == "extension.modelCalls"
        with pytest.raises(InvalidDispatch):
            await runtime.decide_budget(
                gate.approval_id, "reject", extension={"modelCalls": 1}, approver="ops"
            )
        with pytest.raises(ApprovalNotFound):
            await runtime.decide_budget(f"{receipt.conversation_id}.999", "reject", approver="x")
        first = await runtime.decide_budget(gate.approval_id, "reject", approver="ops")
        again = await runtime.decide_budget(gate.approval_id, "reject", approver="ops")
        assert first.seq == again.seq  # idempotent
        with pytest.raises(ApprovalConflict):
            await runtime.decide_budget(
                gate.approval_id, "approve", extension={"modelCalls": 1}, approver="ops"
            )
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED


async def test_an_abort_closes_the_budget_gate(make_runtime: Make, store: Store) -> None:
    park = Budget(tool_calls=1, on_exhausted="park")
    async with make_runtime({"a": define(looping())}) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=park)
        gate = await _parked(runtime, store, receipt.submission_id)
        await runtime.abort_submission(receipt.submission_id)
        outcome = await settle(runtime, receipt.submission_id)
        assert outcome["status"] == "aborted"
        [closed] = (await runtime.budget_gates(status=None)).gates
        assert closed.approval_id == gate.approval_id and closed.status == "closed"
        with pytest.raises(InvalidApproval):
            await runtime.decide_budget(gate.approval_id, "reject", approver="ops")
    assert _closed(await _records(store, receipt.conversation_id))


@pytest.mark.process
async def test_a_worker_killed_between_the_gates_request_and_its_park(tmp_path: Path) -> None:
    """A worker writes the budget gate's request and is SIGKILLed before it parks: the next
    attempt finds the request undecided and parks on it (no second request, no call bought
    again); an approval then extends the budget for the run's next attempt."""
    log = tmp_path / "calls.log"
    store = await SqliteStore.open(tmp_path)
    api = Runtime({"a": define(looping())}, store)
    await api.start(worker=False)
    park = Budget(model_calls=2, on_exhausted="park")
    receipt = await api.dispatch("a", "acme", "go", budget=park)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (tmp_path / "worker.log").open("ab") as errors:
        worker = start(
            [sys.executable, str(WORKER), str(tmp_path), str(log), "park"],
            stderr=errors,
            env=env,
        )
    await asyncio.to_thread(worker.wait, 60)  # it killed itself
    assert log.read_text().splitlines().count("model") == 2
    assert "parking" in log.read_text().splitlines()

    def requests() -> list[Any]:
        return [r for r in records if r.kind == "budget_requested"]

    records = await _records(store, receipt.conversation_id)
    assert len(requests()) == 1
    model = looping()
    async with Runtime({"a": define(model)}, store, **FAST) as again:  # the real clock

        async def waiting() -> bool:
            found = await store.get_submission(receipt.submission_id)
            return found.status is SubmissionStatus.WAITING

        await eventually_awaited(waiting, "parked on the gate again")
        [gate] = (await again.budget_gates()).gates
        records = await _records(store, receipt.conversation_id)
        assert len(requests()) == 1 and gate.approval_id == requests()[0].payload.gate_id
        assert model.invocations == 0  # the two paid for were not bought again
        await again.decide_budget(
            gate.approval_id, "approve", extension={"modelCalls": 1}, approver="ops"
        )

        async def parked_again() -> list[Any]:
            return list((await again.budget_gates()).gates)

        [second] = await eventually_awaited(parked_again, "parked on a second gate")
        assert model.invocations == 1 and second.args["max"] == 3
        await again.decide_budget(second.approval_id, "reject", approver="ops")
        outcome = await settle(again, receipt.submission_id)
    await api.close()
    assert outcome["errorCode"] == BUDGET_EXHAUSTED and outcome["result"] == "step 3"
    details = outcome["errorDetails"]
    assert isinstance(details, dict) and details["modelCalls"] == 3
    assert _closed(await _records(store, receipt.conversation_id))
    await store.close()


async def test_a_budget_gate_outlives_its_runtime(make_runtime: Make, store: Store) -> None:
    """Parked, the runtime closed; another decides, and runs it on from the journal."""
    park = Budget(model_calls=2, on_exhausted="park")
    first_model = looping()
    runtime = make_runtime({"a": define(first_model)})
    await runtime.start()
    receipt = await runtime.dispatch("a", "acme", "go", budget=park)
    gate = await _parked(runtime, store, receipt.submission_id)
    await runtime.close()
    second_model = looping()
    async with make_runtime({"a": define(second_model)}) as again:
        await again.decide_budget(
            gate.approval_id, "approve", extension={"modelCalls": 2}, approver="ops"
        )
        second = await _parked(again, store, receipt.submission_id)
        assert second.args["max"] == 4 and second.args["used"] == 4
        await again.decide_budget(second.approval_id, "reject", approver="ops")
        outcome = await settle(again, receipt.submission_id)
    assert first_model.invocations == 2 and second_model.invocations == 2
    assert outcome["errorCode"] == BUDGET_EXHAUSTED and outcome["result"] == "step 4"


async def test_a_child_parks_on_its_budget_while_its_parent_waits(
    make_runtime: Make, store: Store
) -> None:
    """A subagent's own budget gate: the child waits for a person, its parent for the child;
    an approval runs the child on, a rejection settles it, and the parent gets its answer
    (the child's failure, with its usage) and goes on."""

    def parent_reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return "all done"
        return [ToolUse("task", {"agent": "researcher", "prompt": "X"}, call_id="t1")]

    child_model = looping()
    parent_model = ScriptedModel(parent_reply)
    agents = {
        "parent": define(parent_model, tools=()),
        "researcher": define(child_model, budget=Budget(model_calls=2, on_exhausted="park")),
    }
    async with make_runtime(agents, subagents={"parent": ["researcher"]}) as runtime:
        receipt = await runtime.dispatch("parent", "acme", "go", budget=Budget(model_calls=9))

        async def gates() -> list[Any]:
            return list((await runtime.budget_gates()).gates)

        [gate] = await until_emitted(runtime, gates)
        assert gate.key.agent == "researcher" and child_model.invocations == 2
        await runtime.decide_budget(
            gate.approval_id, "approve", extension={"modelCalls": 1}, approver="ops"
        )

        async def second_gate() -> list[Any]:
            return [g for g in await gates() if g.approval_id != gate.approval_id]

        [second] = await until_emitted(runtime, second_gate)
        assert child_model.invocations == 3
        await runtime.decide_budget(second.approval_id, "reject", approver="ops")
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["status"] == "succeeded" and outcome["result"] == "all done"
    assert parent_model.invocations == 2
    records = await _records(store, receipt.conversation_id)
    [finished] = [r.payload for r in records if r.kind == "task_finished"]
    assert finished.error_code == BUDGET_EXHAUSTED and finished.model_calls == 3


# --- session budgets -------------------------------------------------------------------------


async def test_a_session_budget_counts_every_submission_of_the_session(
    make_runtime: Make, store: Store
) -> None:
    """Three calls a session: the first message's run spends two, the second's one, and the
    third message's run is refused before it calls at all; another session has its own."""

    def two_steps(request: ModelRequest) -> object:
        since = 0
        for message in reversed(request.messages):
            if message.role == "user":
                break
            since += message.role == "assistant"
        if since == 0:
            return [ToolUse("lookup", {"q": str(len(request.messages))})]
        return "done"

    model = ScriptedModel(two_steps)
    agents = {"a": define(model, session_budget=Budget(model_calls=3))}
    async with make_runtime(agents) as runtime:
        first = await runtime.dispatch("a", "acme", "one")
        assert (await settle(runtime, first.submission_id))["status"] == "succeeded"
        second = await runtime.dispatch("a", "acme", "two")
        outcome = await settle(runtime, second.submission_id)
        assert outcome["errorCode"] == BUDGET_EXHAUSTED and model.invocations == 3
        details = outcome["errorDetails"]
        assert isinstance(details, dict)
        assert (details["scope"], details["limit"], details["used"]) == ("session", "modelCalls", 3)
        assert "session budget exhausted" in str(outcome["error"])
        third = await runtime.dispatch("a", "acme", "three")
        assert (await settle(runtime, third.submission_id))["errorCode"] == BUDGET_EXHAUSTED
        assert model.invocations == 3
        other = await runtime.dispatch("a", "acme", "one", session="other")
        assert (await settle(runtime, other.submission_id))["status"] == "succeeded"
    assert _closed(await _records(store, second.conversation_id))


async def test_a_session_budget_gate_extends_the_session(make_runtime: Make, store: Store) -> None:
    """Parked on the session's budget: the extension raises the session's limit for its
    later submissions too; the submission's own budget is untouched."""
    model = looping()
    session = Budget(model_calls=2, on_exhausted="park")
    async with make_runtime({"a": define(model)}, session_budget=session) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=Budget(model_calls=10))
        gate = await _parked(runtime, store, receipt.submission_id)
        assert gate.args["budget"] == {"modelCalls": 2, "onExhausted": "park"}
        assert gate.args["spent"]["modelCalls"] == 2
        await runtime.decide_budget(
            gate.approval_id, "approve", extension={"modelCalls": 2}, approver="ops"
        )
        again = await _parked(runtime, store, receipt.submission_id)
        assert again.args["max"] == 4 and model.invocations == 4
        await runtime.abort_submission(receipt.submission_id)
        await settle(runtime, receipt.submission_id)
        later = await runtime.dispatch("a", "acme", "more")
        third = await _parked(runtime, store, later.submission_id)
        assert third.args["max"] == 4 and model.invocations == 4  # the session's, extended
    records = await _records(store, receipt.conversation_id)
    scopes = [r.payload.scope for r in records if r.kind == "budget_requested"]
    assert scopes == ["session"] * 3


def test_a_session_budget_has_no_wall_time() -> None:
    with pytest.raises(ValueError, match="wall_time"):
        define(looping(), session_budget=Budget(wall_time=60))
    with pytest.raises(ValueError, match="wall_time"):
        App({"a": define(looping())}, session_budget=Budget(wall_time=60))


async def test_wall_time_parks_and_an_extension_adds_time(
    make_runtime: Make, clock: ManualClock, store: Store
) -> None:
    """Out of time under ``park``: the gate's extension adds seconds. (That the wait on the
    gate does not count is the meter's test above: the records' times are the store's
    clock, which a manual clock does not move.)"""
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        if q == "2-0":
            started.set()
            await release.wait()
        return f"found {q}"

    model = looping()
    park = Budget(wall_time=60, model_calls=3, on_exhausted="park")
    async with make_runtime({"a": define(model, tools=(lookup,))}, lease=10_000) as runtime:
        receipt = await runtime.dispatch("a", "acme", "go", budget=park)
        await asyncio.wait_for(started.wait(), 60)
        await clock.advance(61)
        release.set()
        gate = await _parked(runtime, store, receipt.submission_id)
        assert gate.args["limit"] == "wallTime" and model.invocations == 2
        await runtime.decide_budget(
            gate.approval_id, "approve", extension={"wallTime": 30}, approver="ops"
        )
        again = await _parked(runtime, store, receipt.submission_id)
        assert again.args["limit"] == "modelCalls" and model.invocations == 3
        await runtime.decide_budget(again.approval_id, "reject", approver="ops")
        outcome = await settle(runtime, receipt.submission_id)
    assert outcome["errorCode"] == BUDGET_EXHAUSTED
