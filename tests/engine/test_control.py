"""Approvals, abort, multitask policies, steering, structured results, compaction."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec, ManualClock, Runtime, _coordinator
from tether.engine._attempt import run_attempt
from tether.errors import NoRunInFlight, SessionBusy
from tether.journal import Journal, Stamp
from tether.messages import Message
from tether.models import ScriptedModel
from tether.records import UserMessage
from tether.store import SessionKey, Store, SubmissionStatus
from tether.testing import RecordingTools

from ..journal.harnesses import EchoHarness, LoopHarness, planner
from .agents import Steerable, agent, echo_agent, loop_agent, slow_tools
from .test_runtime import settle
from .waits import until_emitted

Make = Callable[..., Runtime]


async def wait_for_status(runtime: Runtime, submission_id: str, status: SubmissionStatus) -> None:
    """Until the submission has ``status``, asked again after each event the runtime emits (a
    claim, a park, a settlement each emit one once committed): no polling."""

    async def reached() -> bool:
        return (await runtime.submission(submission_id)).status is status

    await until_emitted(runtime, reached)


async def test_an_approval_parks_then_resumes_after_the_decision(
    make_runtime: Make, store: Store
) -> None:
    tools = RecordingTools()
    async with make_runtime({"mail": loop_agent(tools)}) as runtime:
        receipt = await runtime.dispatch("mail", "acme", "send_email to bob")
        await wait_for_status(runtime, receipt.submission_id, SubmissionStatus.WAITING)
        assert not tools.calls
        state = await (
            await Journal.open(store, receipt.conversation_id, fence=0)
        ).inspect_approval()
        assert state is not None and state.approval_id is not None
        await runtime.approve(state.approval_id, "approve", approver="ann")
        again = await runtime.approve(state.approval_id, "approve", approver="ann")  # idempotent
        outcome = await settle(runtime, receipt.submission_id)
        assert outcome["status"] == "succeeded" and len(tools.calls) == 1
        assert again.kind == "approval_decided"


async def test_abort_settles_running_and_queued_work(make_runtime: Make) -> None:
    started = asyncio.Event()
    async with make_runtime({"slow": loop_agent(slow_tools(30, started))}) as runtime:
        running = await runtime.dispatch("slow", "acme", "lookup slowly")
        queued = await runtime.dispatch("slow", "acme", "next")
        await asyncio.wait_for(started.wait(), 60)
        aborted = await runtime.abort("slow", "acme")
        assert set(aborted) == {running.submission_id, queued.submission_id}
        for receipt in (running, queued):
            outcome = await settle(runtime, receipt.submission_id)
            assert outcome["status"] == "aborted" and outcome["errorCode"] == "aborted"


async def test_an_abort_between_the_claim_and_the_run_stops_it(
    make_runtime: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An abort that lands after this process claimed a run but before its work was
    registered (the claim's copy of the submission predates the cancel, and on a manual
    clock no heartbeat reads the store again) still stops it, at once: not after its 30 s
    tool."""
    claimed, go_on = asyncio.Event(), asyncio.Event()

    async def run_attempt_later(*args: Any, **kwargs: Any) -> None:
        claimed.set()
        await go_on.wait()
        await run_attempt(*args, **kwargs)

    monkeypatch.setattr(_coordinator, "run_attempt", run_attempt_later)
    started = asyncio.Event()
    async with make_runtime({"slow": loop_agent(slow_tools(30, started))}) as runtime:
        receipt = await runtime.dispatch("slow", "acme", "lookup slowly")
        await asyncio.wait_for(claimed.wait(), 60)
        await runtime.abort_submission(receipt.submission_id)
        go_on.set()
        async with asyncio.timeout(15):  # well before the tool's 30 s were up
            outcome = await runtime.wait(receipt.submission_id)
        assert outcome["status"] == "aborted"


async def test_multitask_policies(make_runtime: Make) -> None:
    started = asyncio.Event()
    async with make_runtime({"slow": loop_agent(slow_tools(30, started))}) as runtime:
        first = await runtime.dispatch("slow", "acme", "lookup slowly")
        await asyncio.wait_for(started.wait(), 60)
        with pytest.raises(SessionBusy):
            await runtime.dispatch("slow", "acme", "no waiting", multitask="reject")
        second = await runtime.dispatch("slow", "acme", "hello instead", multitask="interrupt")
        assert (await settle(runtime, first.submission_id))["status"] == "aborted"
        assert (await settle(runtime, second.submission_id))["result"] == "echo: hello instead"


async def test_steering_joins_the_running_execution_durably(
    make_runtime: Make, store: Store
) -> None:
    arrived = asyncio.Event()
    model = ScriptedModel(lambda request: " + ".join(m.text for m in request.messages))
    async with make_runtime({"steer": agent(Steerable(arrived), model)}) as runtime:
        with pytest.raises(NoRunInFlight):
            await runtime.steer("steer", "acme", "too early")
        host = await runtime.dispatch("steer", "acme", "start")
        await wait_for_status(runtime, host.submission_id, SubmissionStatus.RUNNING)
        steer = await runtime.steer("steer", "acme", "go left")
        arrived.set()
        assert (await settle(runtime, host.submission_id))["result"] == "start + go left"
        assert await settle(runtime, steer.submission_id) == {
            "status": "succeeded",
            "result": {"deliveredTo": host.submission_id},
        }
        records = await store.read(host.conversation_id)
        delivered = [r for r in records if r.kind == "steer_received"]
        assert len(delivered) == 1 and delivered[0].submission_id == host.submission_id


async def test_dispatch_with_multitask_steer_joins_too(make_runtime: Make) -> None:
    arrived = asyncio.Event()
    model = ScriptedModel(lambda request: " + ".join(m.text for m in request.messages))
    async with make_runtime({"steer": agent(Steerable(arrived), model)}) as runtime:
        host = await runtime.dispatch("steer", "acme", "start")
        await wait_for_status(runtime, host.submission_id, SubmissionStatus.RUNNING)
        joined = await runtime.dispatch("steer", "acme", "also this", multitask="steer")
        arrived.set()
        assert (await settle(runtime, host.submission_id))["result"] == "start + also this"
        assert (await settle(runtime, joined.submission_id))["result"] == {
            "deliveredTo": host.submission_id
        }


SCHEMA: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"score": {"type": "integer"}},
    "required": ["score"],
}


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        (['{"score": 7}'], {"status": "succeeded", "result": {"score": 7}}),
        (
            ["not json", '```json\n{"score": 3}\n```'],
            {"status": "succeeded", "result": {"score": 3}},
        ),
        (["nope", "still nope", "{}"], "result_schema_invalid"),
    ],
)
async def test_structured_results(make_runtime: Make, replies: list[str], expected: object) -> None:
    model = ScriptedModel(replies)
    async with make_runtime({"rate": echo_agent(model)}) as runtime:
        receipt = await runtime.dispatch(
            "rate", "acme", {"body": "rate it", "resultSchema": SCHEMA}
        )
        outcome = await settle(runtime, receipt.submission_id)
    if isinstance(expected, str):
        assert outcome["errorCode"] == expected and model.invocations == 3
    else:
        assert outcome == expected and model.invocations == len(replies)
    if len(replies) > 1:
        assert "JSON Schema" in model.calls[1].messages[-1].text


async def test_completed_but_unsettled_settles_without_a_model_call(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    from tether.store import NewSubmission

    now = clock.now()
    key = SessionKey("echo", "acme")
    await store.admit(NewSubmission("sub-c", key, "conv-c", {"kind": "user", "body": "hi"}, now))
    claimed = await store.claim(
        "sub-c", attempt_id="dead", owner_id="ghost", lease_expires_at=now, now=now
    )
    journal = await Journal.open(
        store,
        "conv-c",
        fence=claimed.fence,
        model=ScriptedModel(["done before the crash"]),
        stamp=Stamp("sub-c", "dead"),
    )
    await journal.exec(EchoHarness(), [UserMessage(body="hi")])  # then the worker died
    model = ScriptedModel(["never"])
    async with make_runtime({"echo": echo_agent(model)}) as runtime:
        outcome = await settle(runtime, "sub-c")
    assert outcome["result"] == "done before the crash" and model.invocations == 0


async def test_compaction_is_queued_and_durable(make_runtime: Make, store: Store) -> None:
    async def summarize(messages: list[Message]) -> str:
        return f"{len(messages)} messages so far"

    model = ScriptedModel(lambda r: f"saw {len(r.messages)}")
    definition = AgentDefinition(
        lambda instance, env: AgentSpec(harness=EchoHarness(), model=model, summarize=summarize)
    )
    async with make_runtime({"echo": definition}) as runtime:
        for text in ("one", "two"):
            await settle(runtime, (await runtime.dispatch("echo", "acme", text)).submission_id)
        compacted = await runtime.compact("echo", "acme")
        assert (await settle(runtime, compacted.submission_id))["result"] == {
            "compacted": True,
            "firstKeptSeq": 9,
        }
        after = await runtime.dispatch("echo", "acme", "three")
        assert (await settle(runtime, after.submission_id))[
            "result"
        ] == "saw 4"  # summary, two, saw 3, three
    assert "4 messages so far" in model.calls[-1].messages[0].text


async def test_a_tool_loop_survives_the_engine(make_runtime: Make) -> None:
    tools = RecordingTools()
    definition = agent(LoopHarness(), ScriptedModel(planner), tools)
    async with make_runtime({"loop": definition}) as runtime:
        receipt = await runtime.dispatch("loop", "acme", "lookup and charge")
        assert (await settle(runtime, receipt.submission_id))[
            "result"
        ] == "done after 2 tool results"
    assert sorted(call.name for call in tools.calls) == ["charge", "lookup"]
