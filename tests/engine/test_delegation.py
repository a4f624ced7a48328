"""Durable subagents (issue 21): the task tool, the parent's wait without a lease, the wake,
cancellation and limits, on every store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tether.agent import agent_spec, tool
from tether.engine import (
    CANCELLED_BY_PARENT,
    TASK_WAIT_EXCEEDED,
    AgentDefinition,
    EngineEvent,
    ManualClock,
    RecoveryDecided,
    Runtime,
    SubagentLimits,
    SubmissionResumed,
    SubmissionSpawned,
    SubmissionWaiting,
)
from tether.journal import Journal
from tether.messages import ModelRequest, ToolResultPart
from tether.models import Delay, ScriptedModel, Text, ToolUse
from tether.records import SubmissionSettled, TaskFinished, TaskSpawned, ToolCalled, ToolOutcome
from tether.store import MemoryStore, Store, Submission, SubmissionStatus, open_store
from tether.testing.storetest import CompleteStore

from ..postgres import store_url
from .conftest import FAST
from .waits import advance_until, until_emitted

WAIT = 30


def _last_tool_results(request: ModelRequest) -> list[str]:
    results: list[str] = []
    for message in reversed(request.messages):
        if message.role != "tool":
            break
        results[:0] = [p.content for p in message.parts if isinstance(p, ToolResultPart)]
    return results


def delegating(*tasks: dict[str, Any]) -> ScriptedModel:
    """A parent model: its first answer calls ``task`` once per entry (in parallel), its
    next one reports what the children said."""

    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return "Findings: " + " | ".join(_last_tool_results(request))
        return [ToolUse("task", task, call_id=f"call-{i}") for i, task in enumerate(tasks)]

    return ScriptedModel(reply)


def researcher(delay: float = 0.0, answer: Callable[[str], str] | None = None) -> ScriptedModel:
    def reply(request: ModelRequest) -> object:
        text = request.messages[-1].text
        found = answer(text) if answer else f"notes on {text}"
        return [Delay(delay), Text(found)] if delay else found

    return ScriptedModel(reply)


def held_until(release: asyncio.Event, model: ScriptedModel) -> ScriptedModel:
    """``model``, answering each request only once ``release`` is set."""
    answer = model.request

    async def held(request: ModelRequest, stream: Any = None) -> Any:
        await asyncio.wait_for(release.wait(), WAIT)
        return await answer(request, stream)

    model.request = held  # type: ignore[method-assign]
    return model


def define(model: ScriptedModel, description: str | None = None) -> AgentDefinition:
    spec = agent_spec(model)
    return AgentDefinition(lambda instance, env: spec, description=description)


class Recorder:
    def __init__(self) -> None:
        self.events: list[EngineEvent] = []

    async def __call__(self, event: EngineEvent) -> None:
        self.events.append(event)

    def of(self, kind: type[EngineEvent]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


async def _children_of(
    runtime: Runtime, store: CompleteStore, submission_id: str
) -> list[Submission]:
    """The children of a submission, once it has spawned one (a spawn is an event)."""
    return await until_emitted(runtime, lambda: store.list_children(submission_id))


async def _records(store: Store, conversation_id: str) -> list[Any]:
    journal = await Journal.open(store, conversation_id)
    return list(await journal.records())


async def test_a_task_call_runs_a_child_and_its_answer_is_the_tool_result(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    parent_model = delegating({"agent": "researcher", "prompt": "tides"})
    child_model = researcher()
    recorder = Recorder()
    runtime = make_runtime(
        {
            "assistant": define(parent_model),
            "researcher": define(child_model, "answers lookups"),
        },
        subagents={"assistant": ["researcher"]},
        observers=[recorder],
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "ask the researcher about tides")
    async with asyncio.timeout(WAIT):
        settled = await runtime.wait(receipt.submission_id)
    assert settled == {"status": "succeeded", "result": "Findings: notes on tides"}

    # The task tool was offered with the child's description; the child got none.
    [offered] = [t for t in parent_model.calls[0].tools if t.name == "task"]
    assert "researcher: answers lookups" in offered.description
    assert all(t.name != "task" for t in child_model.calls[0].tools)

    records = await _records(store, receipt.conversation_id)
    [intent] = [r for r in records if isinstance(r.payload, ToolCalled)]
    [spawned] = [r.payload for r in records if isinstance(r.payload, TaskSpawned)]
    [finished] = [r.payload for r in records if isinstance(r.payload, TaskFinished)]
    [outcome] = [r.payload for r in records if isinstance(r.payload, ToolOutcome)]
    assert intent.payload.mediation == "task" and outcome.content == "notes on tides"
    assert finished.status == "succeeded" and finished.result == "notes on tides"
    assert finished.model_calls == 1 and finished.agent == "researcher"

    child = await store.get_submission(spawned.child_submission_id)
    assert child.parent_submission_id == receipt.submission_id and child.depth == 1
    assert child.parent_call_id == "call-0" and child.key.agent == "researcher"
    assert (child.key.instance, child.key.session) == ("acme", spawned.session)
    conversation = await store.get_conversation(child.conversation_id)
    assert conversation.parent is not None and conversation.parent.reason == "task"
    assert (conversation.parent.conversation_id, conversation.parent.seq) == (
        receipt.conversation_id,
        intent.seq,
    )

    [spawn_event] = recorder.of(SubmissionSpawned)
    assert spawn_event.parent_submission_id == receipt.submission_id
    waiting = recorder.of(SubmissionWaiting)
    resumed = recorder.of(SubmissionResumed)
    # A child this fast may settle before its parent parks (then the park requeues the
    # parent at once), or even before the parent reads its state (then the answer is read
    # in the same attempt, and the parent neither parks nor resumes).
    assert ([w.children for w in waiting], [r.children for r in resumed]) in (
        ([(child.id,)], [(child.id,)]),
        ([], [(child.id,)]),
        ([], []),
    )
    parent = await store.get_submission(receipt.submission_id)
    assert parent.attempt_count == 1  # waiting is not failing


async def test_parallel_task_calls_fan_out_and_the_parent_waits_without_a_lease(
    make_runtime: Callable[..., Runtime], store: CompleteStore
) -> None:
    release = asyncio.Event()
    child_model = held_until(release, ScriptedModel(lambda r: f"about {r.messages[-1].text}"))
    runtime = make_runtime(
        {
            "assistant": define(
                delegating(
                    {"agent": "researcher", "prompt": "X"}, {"agent": "researcher", "prompt": "Y"}
                )
            ),
            "researcher": define(child_model),
        },
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "ask about X and about Y")

    async def parked_on_both() -> tuple[Submission, list[Submission]] | None:
        parent = await store.get_submission(receipt.submission_id)
        children = await store.list_children(receipt.submission_id)
        parked = parent.status is SubmissionStatus.WAITING and len(children) == 2
        return (parent, children) if parked else None

    parent, children = await until_emitted(runtime, parked_on_both)
    assert parent.lease_expires_at is None and parent.owner_id is None
    assert parent.wait_reason == "children"
    assert {c.status for c in children} <= {SubmissionStatus.RUNNING, SubmissionStatus.QUEUED}
    release.set()
    async with asyncio.timeout(WAIT):
        settled = await runtime.wait(receipt.submission_id)
    assert settled["result"] == "Findings: about X | about Y"
    after = [await store.get_submission(c.id) for c in children]
    assert {c.status for c in after} == {SubmissionStatus.SETTLED}


async def test_calls_past_the_limit_get_an_error_result_at_once(
    make_runtime: Callable[..., Runtime], store: CompleteStore
) -> None:
    tasks = [{"agent": "researcher", "prompt": f"topic {i}"} for i in range(3)]
    runtime = make_runtime(
        {"assistant": define(delegating(*tasks)), "researcher": define(researcher())},
        subagents={"assistant": ["researcher"]},
        subagent_limits=SubagentLimits(max_children_per_run=2),
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "three topics")
    async with asyncio.timeout(WAIT):
        settled = await runtime.wait(receipt.submission_id)
    result = str(settled["result"])
    assert "notes on topic 0" in result and "notes on topic 1" in result
    assert "the limit of 2 subagent tasks" in result
    assert len(await store.list_children(receipt.submission_id)) == 2


async def test_a_whole_tree_spawns_at_most_its_total(
    make_runtime: Callable[..., Runtime], store: CompleteStore
) -> None:
    """Three leads of three researchers each would be twelve submissions below the root
    (fan-out to the power of the depth); ``max_total=5`` stops the tree at five, whichever
    of the leads running at once spawns first, and each call past it gets an error result
    at once, at every depth. The root spawns its leads one by one while the first already
    run: a lead can fill the tree before the root's third is admitted, and a refused lead
    makes no calls of its own, so the calls are counted, not assumed to be twelve."""
    leads = [{"agent": "lead", "prompt": f"area {i}"} for i in range(3)]
    topics = [{"agent": "researcher", "prompt": f"topic {i}"} for i in range(3)]
    runtime = make_runtime(
        {
            "assistant": define(delegating(*leads)),
            "lead": define(delegating(*topics)),
            "researcher": define(researcher()),
        },
        subagents={"assistant": ["lead"], "lead": ["researcher"]},
        subagent_limits=SubagentLimits(max_depth=2, max_total=5),
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "survey three areas")
    async with asyncio.timeout(WAIT):
        settled = await runtime.wait(receipt.submission_id)
    assert settled["status"] == "succeeded"
    below = await store.list_children(receipt.submission_id)
    for child in list(below):
        below += await store.list_children(child.id)
    assert len(below) == 5
    calls = refusals = 0
    for submission in [await store.get_submission(receipt.submission_id), *below]:
        for record in await _records(store, submission.conversation_id):
            payload = record.payload
            calls += isinstance(payload, ToolCalled) and payload.tool == "task"
            if isinstance(payload, ToolOutcome) and str(payload.content).startswith(
                "task: the limit of 5 subagent tasks for this whole task tree is reached"
            ):
                assert payload.is_error
                refusals += 1
    assert calls in (3 + 2 * 3, 3 + 3 * 3)  # two leads, or all three, got to call
    assert refusals == calls - 5


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        ({"agent": "nobody", "prompt": "x"}, "cannot delegate to 'nobody'"),
        ({"agent": "researcher"}, "prompt"),
        ({"agent": "researcher", "prompt": "x", "result_schema": {"type": 7}}, "JSON Schema"),
    ],
)
async def test_a_bad_task_call_gets_an_error_result_and_spawns_nothing(
    make_runtime: Callable[..., Runtime], store: CompleteStore, task: dict[str, Any], problem: str
) -> None:
    runtime = make_runtime(
        {"assistant": define(delegating(task)), "researcher": define(researcher())},
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "go")
    async with asyncio.timeout(WAIT):
        settled = await runtime.wait(receipt.submission_id)
    assert problem in str(settled["result"])
    assert await store.list_children(receipt.submission_id) == []


async def test_a_result_schema_makes_the_answer_validated_json(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    runtime = make_runtime(
        {
            "assistant": define(
                delegating({"agent": "researcher", "prompt": "count", "result_schema": schema})
            ),
            "researcher": define(researcher(answer=lambda text: json.dumps({"n": 3}))),
        },
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "count it")
    async with asyncio.timeout(WAIT):
        settled = await runtime.wait(receipt.submission_id)
    assert settled["result"] == 'Findings: {"n":3}'
    records = await _records(store, receipt.conversation_id)
    [outcome] = [r.payload for r in records if isinstance(r.payload, ToolOutcome)]
    assert outcome.data == {"n": 3}


async def test_a_failed_child_comes_back_as_an_error_result(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    def broken(request: ModelRequest) -> object:
        raise RuntimeError("the archive is on fire")

    runtime = make_runtime(
        {
            "assistant": define(delegating({"agent": "researcher", "prompt": "x"})),
            "researcher": AgentDefinition(
                lambda instance, env: agent_spec(ScriptedModel(broken)), max_attempts=1
            ),
        },
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "go")
    async with asyncio.timeout(WAIT):
        settled = await runtime.wait(receipt.submission_id)
    assert settled["status"] == "succeeded"  # the parent went on
    assert "The researcher task failed (run_failed)" in str(settled["result"])
    assert "the archive is on fire" in str(settled["result"])


async def test_a_lapsed_wait_lands_an_error_and_cancels_the_child(
    make_runtime: Callable[..., Runtime], store: CompleteStore, clock: ManualClock
) -> None:
    runtime = make_runtime(
        {
            "assistant": define(delegating({"agent": "researcher", "prompt": "x"})),
            "researcher": define(researcher(delay=WAIT)),
        },
        subagents={"assistant": ["researcher"]},
        subagent_limits=SubagentLimits(max_wait=0.3),
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "go")
    settled = await advance_until(clock, runtime.wait(receipt.submission_id), step=0.1)
    assert TASK_WAIT_EXCEEDED in str(settled["result"])
    [child] = await store.list_children(receipt.submission_id)
    async with asyncio.timeout(WAIT):
        child_settled = await runtime.wait(child.id)
    assert child_settled["errorCode"] == CANCELLED_BY_PARENT


async def test_a_parent_that_settles_cancels_its_live_children(
    make_runtime: Callable[..., Runtime], store: CompleteStore, clock: ManualClock
) -> None:
    runtime = make_runtime(
        {
            "assistant": define(delegating({"agent": "researcher", "prompt": "x"})),
            "researcher": define(researcher(delay=WAIT)),
        },
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "go")
    await _children_of(runtime, store, receipt.submission_id)
    await runtime.abort("assistant", "acme")
    async with asyncio.timeout(WAIT):
        assert (await runtime.wait(receipt.submission_id))["status"] == "aborted"
    [child] = await store.list_children(receipt.submission_id)
    # A child still queued is cancelled by a claim pass: the claim tick, if no wake-up came.
    child_settled = await advance_until(clock, runtime.wait(child.id), step=FAST["claim_interval"])
    assert child_settled["errorCode"] == CANCELLED_BY_PARENT


async def test_replaying_the_parent_spawns_nothing_and_a_child_replays_alone(
    make_runtime: Callable[..., Runtime], store: CompleteStore
) -> None:
    parent_model = delegating({"agent": "researcher", "prompt": "tides"})
    child_model = researcher()
    runtime = make_runtime(
        {"assistant": define(parent_model), "researcher": define(child_model)},
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "go")
    async with asyncio.timeout(WAIT):
        await runtime.wait(receipt.submission_id)
    calls = parent_model.invocations
    spec = agent_spec(parent_model)
    journal = await Journal.open(store, receipt.conversation_id)
    [output] = await journal.replay(spec.harness)
    assert output == "Findings: notes on tides"
    assert parent_model.invocations == calls
    [child] = await store.list_children(receipt.submission_id)
    # The child replays on its own, from its own conversation: no model call either.
    child_calls = child_model.invocations
    child_journal = await Journal.open(store, child.conversation_id)
    assert await child_journal.replay(agent_spec(child_model).harness) == ["notes on tides"]
    assert child_model.invocations == child_calls == 1


async def test_an_operator_abort_of_a_child_gives_the_parent_an_error_and_it_goes_on(
    make_runtime: Callable[..., Runtime], store: CompleteStore
) -> None:
    runtime = make_runtime(
        {
            "assistant": define(delegating({"agent": "researcher", "prompt": "x"})),
            "researcher": define(researcher(delay=WAIT)),
        },
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "go")
    children = await _children_of(runtime, store, receipt.submission_id)
    info = await runtime.abort_submission(children[0].id)
    assert info.submission.cancel_requested_at is not None
    async with asyncio.timeout(WAIT):
        settled = await runtime.wait(receipt.submission_id)
        child_settled = await runtime.wait(children[0].id)
    assert child_settled["errorCode"] == "aborted"
    assert settled["status"] == "succeeded"
    assert "The researcher task failed (aborted)" in str(settled["result"])
    again = await runtime.abort_submission(receipt.submission_id)  # settled: left as it is
    assert again.submission.settlement == settled


async def test_the_tree_and_the_usage_roll_up_the_children(
    make_runtime: Callable[..., Runtime], store: Store
) -> None:
    runtime = make_runtime(
        {
            "assistant": define(
                delegating(
                    {"agent": "researcher", "prompt": "X"}, {"agent": "researcher", "prompt": "Y"}
                )
            ),
            "researcher": define(researcher()),
        },
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "X and Y")
    async with asyncio.timeout(WAIT):
        await runtime.wait(receipt.submission_id)
    info = await runtime.submission(receipt.submission_id)
    assert [c.key.agent for c in info.children] == ["researcher", "researcher"]
    tree = await runtime.tree(receipt.submission_id)
    assert tree.submission.id == receipt.submission_id and not tree.truncated
    assert [node.submission.status for node in tree.children] == ["settled", "settled"]
    assert [node.usage.calls for node in tree.children] == [1, 1]
    assert [node.children for node in tree.children] == [(), ()]
    usage = await runtime.usage(receipt.conversation_id, submission_id=receipt.submission_id)
    assert usage.calls == 2 + 2  # its own two model calls and one per child
    # Listed as the log holds their answers: in the order they became durable, which is not
    # the spawn order when a later child settles before the parent reads an earlier one.
    assert sorted(child.submission_id for child in usage.children) == sorted(
        c.id for c in info.children
    )
    assert [child.calls for child in usage.children] == [1, 1]


async def test_a_fork_before_the_spawn_spawns_new_children_and_one_after_inherits_the_answer(
    make_runtime: Callable[..., Runtime], store: CompleteStore
) -> None:
    parent_model = delegating({"agent": "researcher", "prompt": "tides"})
    runtime = make_runtime(
        {"assistant": define(parent_model), "researcher": define(researcher())},
        subagents={"assistant": ["researcher"]},
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "go")
    async with asyncio.timeout(WAIT):
        await runtime.wait(receipt.submission_id)
    records = await _records(store, receipt.conversation_id)
    [original] = await store.list_children(receipt.submission_id)
    [intent] = [r for r in records if isinstance(r.payload, ToolCalled)]

    before = await runtime.fork(receipt.conversation_id, at_seq=intent.seq - 1, session="before")
    again = await runtime.dispatch("assistant", "acme", "go again", session=before.key.session)
    async with asyncio.timeout(WAIT):
        assert (await runtime.wait(again.submission_id))["status"] == "succeeded"
    [respawned] = await store.list_children(again.submission_id)
    assert respawned.id != original.id and respawned.conversation_id != original.conversation_id

    after = await runtime.fork(receipt.conversation_id, at_seq=len(records), session="after")
    assert after.repaired == ()
    inherited = [r for r in await _records(store, after.id) if isinstance(r.payload, TaskFinished)]
    assert [r.payload.child_submission_id for r in inherited] == [original.id]
    # Its history holds the child's answer: replaying it spawns nothing and calls no model.
    calls = parent_model.invocations
    journal = await Journal.open(store, after.id)
    await journal.replay(agent_spec(parent_model).harness)
    assert parent_model.invocations == calls
    assert len(await store.list_children(receipt.submission_id)) == 1


async def test_a_lost_wake_is_replayed_by_the_sweep(
    make_runtime: Callable[..., Runtime],
    store: Store,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store that settled the last child without requeuing its parent (as an older version
    of the contract, or a crash between two commits of a store without the atomic wake, would
    leave it): the periodic sweep finds the parent waiting on settled children and requeues
    it, once; the parent gets exactly one outcome."""
    if not isinstance(store, MemoryStore):
        pytest.skip("the lost wake is simulated on the reference model")
    monkeypatch.setattr(MemoryStore, "_has_unsettled_children", lambda self, sid: True)
    recorder = Recorder()
    parked = asyncio.Event()

    async def on_park(event: EngineEvent) -> None:
        if isinstance(event, SubmissionWaiting):
            parked.set()

    # The child answers once its parent has parked: only a parked parent can lose its wake.
    runtime = make_runtime(
        {
            "assistant": define(delegating({"agent": "researcher", "prompt": "x"})),
            "researcher": define(held_until(parked, researcher())),
        },
        subagents={"assistant": ["researcher"]},
        observers=[recorder, on_park],
    )
    await runtime.start()
    receipt = await runtime.dispatch("assistant", "acme", "go")
    # The sweep runs a lease apart.
    settled = await advance_until(clock, runtime.wait(receipt.submission_id), step=0.5)
    assert settled["result"] == "Findings: notes on x"
    stranded = [e for e in recorder.of(RecoveryDecided) if e.decision == "requeue_stranded"]
    assert [e.detail for e in stranded] == ["its children have settled"]
    records = await _records(store, receipt.conversation_id)
    assert len([r for r in records if isinstance(r.payload, ToolOutcome)]) == 1
    assert len([r for r in records if isinstance(r.payload, SubmissionSettled)]) == 1


async def test_a_child_may_run_on_another_worker_than_its_parent(
    make_runtime: Callable[..., Runtime], store: CompleteStore
) -> None:
    """Two workers on one store, one run at a time each: the parent's batch holds its worker
    (a task call beside a tool still running), so its child can only be claimed by the other
    worker; the parent is woken, wherever it resumes, by the child's settlement there."""
    if isinstance(store, MemoryStore):
        pytest.skip("workers share a store across processes on SQLite and PostgreSQL")
    release = asyncio.Event()

    @tool(name="hold")
    async def hold() -> str:
        """Wait until the test lets go."""
        await asyncio.wait_for(release.wait(), WAIT)
        return "held"

    def reply(request: ModelRequest) -> object:
        if request.messages[-1].role == "tool":
            return "Findings: " + " | ".join(_last_tool_results(request))
        return [
            ToolUse("task", {"agent": "researcher", "prompt": "tides"}, call_id="call-0"),
            ToolUse("hold", call_id="call-1"),
        ]

    spec = agent_spec(ScriptedModel(reply), tools=[hold])
    agents = {
        "assistant": AgentDefinition(lambda instance, env: spec),
        "researcher": define(researcher()),
    }
    schema = getattr(store, "schema", None)  # PostgreSQL: the same schema, another pool
    other_store = await open_store(store_url(schema) if schema else store.url)
    try:
        first = make_runtime(agents, subagents={"assistant": ["researcher"]}, max_concurrent_runs=1)
        await first.start()
        receipt = await first.dispatch("assistant", "acme", "go")
        [child] = await _children_of(first, store, receipt.submission_id)
        second = Runtime(
            agents,
            other_store,
            subagents={"assistant": ["researcher"]},
            max_concurrent_runs=1,
            **FAST,
        )
        await second.start()
        try:
            async with asyncio.timeout(WAIT):
                child_settled = await second.wait(child.id)
            release.set()
            async with asyncio.timeout(WAIT):
                settled = await first.wait(receipt.submission_id)
        finally:
            await second.close()
    finally:
        release.set()
        await other_store.close()
    assert child_settled["status"] == "succeeded"
    assert settled["result"] == "Findings: notes on tides | held"
    [child_attempt] = await store.list_attempts(child.id)
    [parent_attempt, *_] = await store.list_attempts(receipt.submission_id)
    assert child_attempt.owner_id == second.config.owner_id != parent_attempt.owner_id
