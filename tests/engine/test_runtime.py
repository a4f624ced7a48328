"""The runtime end to end in one process: admission, settlement, ordering, budgets, recovery."""

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest
from pydantic import JsonValue

from tether.engine import (
    AgentSpec,
    EngineEvent,
    ManualClock,
    Runtime,
    SubmissionSettledEvent,
)
from tether.errors import DispatchConflict, InvalidDispatch, RuntimeClosed, UnknownAgent
from tether.models import ScriptedModel
from tether.records import SubmissionSettled
from tether.store import NewSubmission, SessionKey, Store, SubmissionStatus
from tether.testing import RecordingTools

from ..journal.harnesses import EchoHarness
from .agents import echo_agent, loop_agent, slow_tools
from .takeover import ANOTHER_WORKER, claimed_here, claims_held_still, take_over
from .waits import WAIT

Make = Callable[..., Runtime]


async def settle(runtime: Runtime, submission_id: str) -> dict[str, JsonValue]:
    async with asyncio.timeout(60):  # room for a loaded machine, under the 120 s test timeout
        return await runtime.wait(submission_id)


async def test_dispatch_settles_with_the_output(make_runtime: Make, store: Store) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        receipt = await runtime.dispatch("echo", "acme", "hi")
        assert await settle(runtime, receipt.submission_id) == {
            "status": "succeeded",
            "result": "echo: hi",
        }
        records = await runtime.records(receipt.conversation_id)
        kinds = [r.kind for r in records]
        assert kinds[0] == "conversation_created" and kinds[-1] == "submission_settled"
        assert kinds.count("user_message") == 1 and kinds.count("submission_settled") == 1
        assert all(r.submission_id == receipt.submission_id for r in records[1:])
        info = await runtime.submission(receipt.submission_id)
        assert info.status is SubmissionStatus.SETTLED and len(info.attempts) == 1
        assert await store.verify(receipt.conversation_id) == len(records)


async def test_dispatch_is_idempotent_per_session_key(make_runtime: Make, store: Store) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        first = await runtime.dispatch("echo", "acme", "hi", dispatch_id="d-1")
        again = await runtime.dispatch("echo", "acme", "hi", dispatch_id="d-1")
        assert again.submission_id == first.submission_id and not again.created
        with pytest.raises(DispatchConflict):
            await runtime.dispatch("echo", "acme", "different", dispatch_id="d-1")
        other = await runtime.dispatch("echo", "acme", "hi", dispatch_id="d-1", session="other")
        assert other.submission_id != first.submission_id
        await settle(runtime, first.submission_id)


@pytest.mark.parametrize(
    "message",
    [
        {"kind": "nope", "body": "x"},
        {"kind": "signal", "body": "x"},
        {"body": ""},
        {"body": "x", "extra": 1},
        {"body": "x", "resultSchema": {"type": 7}},
    ],
)
async def test_malformed_messages_write_nothing(
    make_runtime: Make, store: Store, message: dict[str, object]
) -> None:
    async with make_runtime({"echo": echo_agent()}) as runtime:
        with pytest.raises(InvalidDispatch):
            await runtime.dispatch("echo", "acme", message)
        with pytest.raises(UnknownAgent):
            await runtime.dispatch("nobody", "acme", "hi")
        with pytest.raises(InvalidDispatch):
            await runtime.dispatch("echo", "a/b", "hi")
        assert await store.list_submissions() == []


async def test_sessions_run_in_order_and_concurrently(make_runtime: Make) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    slow = loop_agent(slow_tools(60, started, release))  # a1's tool runs until released
    async with make_runtime({"slow": slow, "echo": echo_agent()}) as runtime:
        a1 = await runtime.dispatch("slow", "acme", "lookup one", session="a")
        a2 = await runtime.dispatch("slow", "acme", "hello two", session="a")
        await asyncio.wait_for(started.wait(), 60)
        fast = await runtime.dispatch("echo", "acme", "quick", session="b")
        await settle(runtime, fast.submission_id)
        assert (await runtime.submission(a1.submission_id)).status is SubmissionStatus.RUNNING
        release.set()
        await settle(runtime, a2.submission_id)
        records = await runtime.records(a1.conversation_id)
        first_settled = next(r.seq for r in records if r.kind == "submission_settled")
        assert all(r.seq > first_settled for r in records if r.submission_id == a2.submission_id)


async def test_transient_errors_retry_and_fatal_errors_do_not(make_runtime: Make) -> None:
    model = ScriptedModel([ConnectionError("reset"), "second time lucky"])
    flaky = echo_agent(model)
    broken = echo_agent(ScriptedModel([ValueError("bad request")]))
    async with make_runtime({"flaky": flaky, "broken": broken}) as runtime:
        ok = await runtime.dispatch("flaky", "acme", "hi")
        bad = await runtime.dispatch("broken", "acme", "hi")
        assert (await settle(runtime, ok.submission_id))["result"] == "second time lucky"
        info = await runtime.submission(ok.submission_id)
        # A model call's connection error is retried within the call, in the same attempt.
        assert info.submission.attempt_count == 1 and model.invocations == 2
        failure = await settle(runtime, bad.submission_id)
        assert failure["errorCode"] == "run_failed" and "bad request" in str(failure["error"])
        assert (await runtime.submission(bad.submission_id)).submission.attempt_count == 1


async def test_the_attempt_budget_is_checked_before_user_code_and_survives_restarts(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    model = ScriptedModel(["never"])
    key = SessionKey("echo", "acme")
    now = clock.now()
    admission = await store.admit(
        NewSubmission("sub-1", key, "conv-1", {"kind": "user", "body": "hi"}, now)
    )
    for n in range(3):  # three attempts burned by processes that died
        claimed = await store.claim(
            "sub-1", attempt_id=f"dead-{n}", owner_id="ghost", lease_expires_at=now, now=now
        )
        await store.release("sub-1", attempt_id=str(claimed.attempt_id), last_error=f"crash {n}")
    async with make_runtime({"echo": echo_agent(model, max_attempts=3)}) as runtime:
        outcome = await settle(runtime, admission.submission.id)
    assert outcome["errorCode"] == "attempt_budget_exhausted" and "crash 2" in str(outcome["error"])
    assert model.invocations == 0


async def test_timeout_before_running_makes_no_model_call(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    model = ScriptedModel(["never"])
    old = clock.now() - timedelta(hours=2)
    await store.admit(
        NewSubmission(
            "sub-old", SessionKey("echo", "acme"), "conv-1", {"kind": "user", "body": "hi"}, old
        )
    )
    async with make_runtime({"echo": echo_agent(model)}) as runtime:
        outcome = await settle(runtime, "sub-old")
    assert outcome["errorCode"] == "timeout_exceeded" and model.invocations == 0


async def test_a_lost_worker_is_reclaimed_and_resumed(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    tools = RecordingTools()
    async with make_runtime({"loop": loop_agent(tools)}) as runtime:
        receipt = await runtime.dispatch("loop", "acme", "lookup x", dispatch_id="once")
        await settle(runtime, receipt.submission_id)
    # Replay the same work as if the first worker died holding the claim: a fresh runtime
    # on a fresh session takes over an expired lease.
    now = clock.now()
    key = SessionKey("loop", "acme", "orphan")
    await store.admit(
        NewSubmission("sub-o", key, "conv-o", {"kind": "user", "body": "lookup y"}, now)
    )
    await store.claim("sub-o", attempt_id="dead", owner_id="ghost", lease_expires_at=now, now=now)
    async with make_runtime({"loop": loop_agent(tools)}) as runtime:
        outcome = await settle(runtime, "sub-o")
    assert outcome["status"] == "succeeded"
    info = await store.get_submission("sub-o")
    assert info.attempt_count == 2 and info.last_error == "lease expired"


async def test_startup_finishes_interrupted_settlements(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    now = clock.now()
    await store.admit(
        NewSubmission(
            "sub-t", SessionKey("echo", "acme"), "conv-t", {"kind": "user", "body": "x"}, now
        )
    )
    claimed = await store.claim(
        "sub-t", attempt_id="a1", owner_id="ghost", lease_expires_at=now, now=now
    )
    payload = SubmissionSettled(status="succeeded", result="kept").to_json_object()
    await store.reserve_settlement("sub-t", attempt_id=str(claimed.attempt_id), settlement=payload)
    async with make_runtime({"echo": echo_agent()}) as runtime:
        outcome = await settle(runtime, "sub-t")
    assert outcome == payload
    records = await store.read("conv-t")
    assert [r.kind for r in records].count("submission_settled") == 1


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (EchoHarness(), "EchoHarness"),
        (AgentSpec(harness=EchoHarness()), "AgentSpec"),
        (lambda instance, env: AgentSpec(harness=EchoHarness()), "function"),
        (None, "NoneType"),
    ],
)
def test_an_agent_that_is_no_definition_is_refused_at_construction(
    given: object, named: str
) -> None:
    """Accepted, it failed every attempt of every submission in a retry loop instead."""
    with pytest.raises(TypeError) as caught:
        Runtime({"echo": echo_agent(), "h": given}, "memory://")  # type: ignore[dict-item]
    assert "agents['h']" in str(caught.value) and named in str(caught.value)
    assert "AgentDefinition" in str(caught.value)


def test_agents_that_are_no_mapping_are_refused_at_construction() -> None:
    with pytest.raises(TypeError, match=r"a mapping of agent names to AgentDefinition.*list"):
        Runtime([echo_agent()], "memory://")  # type: ignore[arg-type]


async def test_graceful_shutdown_releases_without_burning_an_attempt(
    make_runtime: Make, store: Store
) -> None:
    started = asyncio.Event()
    runtime = make_runtime({"slow": loop_agent(slow_tools(30, started))})
    await runtime.start()
    receipt = await runtime.dispatch("slow", "acme", "lookup slowly")
    await asyncio.wait_for(started.wait(), 60)
    await runtime.close()
    submission = await store.get_submission(receipt.submission_id)
    assert submission.status is SubmissionStatus.QUEUED and submission.attempt_count == 0
    with pytest.raises(RuntimeClosed):
        await runtime.dispatch("slow", "acme", "after close")
    async with make_runtime({"slow": loop_agent(slow_tools(0))}) as again:
        outcome = await settle(again, receipt.submission_id)
    assert outcome["status"] == "succeeded"
    records = await store.read(receipt.conversation_id)
    assert len({r.attempt_id for r in records if r.attempt_id}) == 2
    assert [r.kind for r in records].count("user_message") == 1


async def test_a_head_claimed_while_its_sessions_previous_run_winds_down_runs_once_claimed(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """A claim that finds the session's previous run here settled but not yet ended keeps
    its head, and runs it when that run ends: one attempt, this worker's. (It used to give
    the claim back and make it again: an attempt that never ran in the submission's
    history, which read as the same worker running it twice.)"""
    winding_down, ended = asyncio.Event(), asyncio.Event()
    key = SessionKey("echo", "acme")

    async def hold_the_first(event: EngineEvent) -> None:
        if isinstance(event, SubmissionSettledEvent) and event.correlation.submission_id == "s-1":
            winding_down.set()  # settled, its run still going (this observer is part of it)
            await ended.wait()

    for n in (1, 2):  # admitted before the worker starts: nothing claimed at admission
        body = {"kind": "user", "body": f"hi {n}"}
        await store.admit(NewSubmission(f"s-{n}", key, "conv", body, clock.now()))
    async with make_runtime({"echo": echo_agent()}, observers=[hold_the_first]) as runtime:
        await asyncio.wait_for(winding_down.wait(), WAIT)
        held = await claimed_here(runtime, store, "s-2")  # a claim pass, now
        assert held.owner_id == runtime.config.owner_id
        ended.set()
        assert (await settle(runtime, "s-2")) == {"status": "succeeded", "result": "echo: hi 2"}
    [attempt] = await store.list_attempts("s-2")
    assert attempt.owner_id == runtime.config.owner_id and attempt.id == held.attempt_id
    assert (await store.get_submission("s-2")).attempt_count == 1


async def test_a_held_claim_taken_over_meanwhile_is_not_run(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """A claim held while its session's previous run winds down is not renewed. If another
    worker took it over meanwhile (this process frozen past its lease), it must not start:
    its run would read the other worker's log and call the model again before its first
    write was refused (the chaos test's frozen worker did)."""
    winding_down, ended = asyncio.Event(), asyncio.Event()
    key = SessionKey("echo", "acme")
    model = ScriptedModel(lambda r: "echo: " + r.messages[-1].text)

    async def hold_the_first(event: EngineEvent) -> None:
        if isinstance(event, SubmissionSettledEvent) and event.correlation.submission_id == "s-1":
            winding_down.set()
            await ended.wait()

    for n in (1, 2):
        body = {"kind": "user", "body": f"hi {n}"}
        await store.admit(NewSubmission(f"s-{n}", key, "conv", body, clock.now()))
    async with make_runtime({"echo": echo_agent(model)}, observers=[hold_the_first]) as runtime:
        await asyncio.wait_for(winding_down.wait(), WAIT)
        held = await claimed_here(runtime, store, "s-2")  # it takes s-2, and holds it
        assert held.owner_id == runtime.config.owner_id
        calls_before = len(model.calls)
        # Another worker takes it over: the held claim's lease ran out unrenewed.
        with claims_held_still(store):
            await clock.advance(runtime.config.lease + 1)
            taken = await take_over(store, clock, held)
        ended.set()
        await asyncio.wait_for(_until_idle(runtime), WAIT)
        assert len(model.calls) == calls_before  # the model was not asked again
    assert (await store.get_submission("s-2")).owner_id == ANOTHER_WORKER
    records = await store.read(taken.conversation_id)
    assert not [r for r in records if r.attempt_id == held.attempt_id]


async def _until_idle(runtime: Runtime) -> None:
    """Until the worker runs nothing (its held claim started, or was dropped)."""
    coordinator = runtime._coordinator
    assert coordinator is not None
    while coordinator.active:
        await asyncio.gather(*coordinator.active.values(), return_exceptions=True)


async def test_a_run_of_an_agent_no_worker_runs_waits_for_one(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """A worker claims only the agents it runs (another worker may run the rest): the run
    waits, visibly, and the first worker that runs its agent takes it."""
    now = clock.now()
    await store.admit(
        NewSubmission(
            "sub-g", SessionKey("gone", "acme"), "conv-g", {"kind": "user", "body": "x"}, now
        )
    )
    async with make_runtime({"echo": echo_agent()}) as runtime:
        async with asyncio.timeout(WAIT):  # until the worker said what it runs
            while not (info := await runtime.submission("sub-g")).waits_for_a_worker:
                await clock.advance(1)
        assert info.status is SubmissionStatus.QUEUED and info.attempts == []
    async with make_runtime({"gone": echo_agent()}) as runtime:
        outcome = await settle(runtime, "sub-g")
    assert outcome["status"] == "succeeded"


async def test_a_backlog_past_the_free_slots_drains_as_runs_end_not_on_the_poll(
    make_runtime: Make, store: Store, clock: ManualClock
) -> None:
    """A settlement wakes the claim loops only for its own session's next head, so a worker
    whose claim took every free slot looks again when a run of its own ends (polls an hour
    apart: only that can drain this backlog in time)."""
    now = clock.now()
    for n in range(6):
        key = SessionKey("echo", "acme", f"backlog-{n}")
        new = NewSubmission(f"sub-{n}", key, f"conv-{n}", {"kind": "user", "body": "hi"}, now)
        await store.admit(new)
    async with make_runtime(
        {"echo": echo_agent()}, claim_interval=3600, max_concurrent_runs=2
    ) as runtime:
        for n in range(6):
            assert (await settle(runtime, f"sub-{n}"))["status"] == "succeeded"
