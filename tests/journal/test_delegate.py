"""Task calls in the journal: intent, spawn and answer recorded once; a park while a child
runs; resume, replay and cuts, against a fake delegation."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from tether.errors import ChildrenPending, MissingToolExecutor, UnmediatedToolCall
from tether.journal import Journal, JournalHooks, Turn
from tether.messages import Mediation, ModelRequest, ToolCall, ToolResult
from tether.models import ScriptedModel
from tether.records import (
    Record,
    SettlementStatus,
    TaskFinished,
    TaskSpawned,
    ToolCalled,
    ToolOutcome,
)
from tether.store import Store

from .harnesses import new_conversation, user
from .test_exec import kinds


class FakeDelegation:
    """Children that settle when the test says so; counts every spawn it was asked for."""

    def __init__(self, refuse: str | None = None, refuse_at_admission: str | None = None) -> None:
        self.refusal = refuse
        self.admission_refusal = refuse_at_admission
        self.spawns: list[str] = []
        self.settled: dict[str, str] = {}
        self.delivered_calls: list[str] = []

    async def refuse(self, call: ToolCall) -> str | None:
        return self.refusal

    async def spawn(self, call: ToolCall, intent: Record) -> TaskSpawned | str:
        self.spawns.append(call.call_id)
        if self.admission_refusal is not None:
            return self.admission_refusal
        return TaskSpawned(
            call_id=call.call_id,
            agent="researcher",
            instance="inst",
            session=f"task-{call.call_id}",
            child_conversation_id=f"conv-{call.call_id}",
            child_submission_id=f"sub-{call.call_id}",
        )

    async def answer(self, spawned: Record) -> tuple[TaskFinished, ToolResult] | None:
        task = spawned.payload
        assert isinstance(task, TaskSpawned)
        text = self.settled.get(task.call_id)
        if text is None:
            return None
        finished = TaskFinished(
            call_id=task.call_id,
            child_conversation_id=task.child_conversation_id,
            child_submission_id=task.child_submission_id,
            status=SettlementStatus.SUCCEEDED,
            result=text,
        )
        return finished, ToolResult(call_id=task.call_id, content=text)

    async def delivered(self, finished: Record) -> None:
        self.delivered_calls.append(str(finished.fields["payload"]["callId"]))


def task(call_id: str, turn: Turn) -> ToolCall:
    return ToolCall(
        call_id=call_id,
        name="task",
        args={"agent": "researcher", "prompt": call_id},
        idempotency_key=f"{turn.execution_id}:{call_id}",
        mediation=Mediation.TASK,
    )


class Fanout:
    """Two task calls in one batch, then a model call on their answers."""

    name, version = "fanout", "1"

    async def run(self, turn: Turn) -> JsonValue:
        results = [await turn.delegate(task(call_id, turn)) for call_id in ("a", "b")]
        turn.wait_for_children()
        contents = [result.content for result in results if result is not None]
        request = ModelRequest(model="test", messages=tuple(turn.inputs))
        answer = (await turn.model(request)).message.text
        return f"{answer}: {' + '.join(contents)}"


async def _open(store: Store, cid: str, delegation: FakeDelegation | None) -> Journal:
    model = ScriptedModel(lambda request: "summed")
    return await Journal.open(store, cid, model=model, hooks=JournalHooks(delegation=delegation))


async def test_the_batch_spawns_every_child_then_parks(store: Store) -> None:
    cid = await new_conversation(store)
    delegation = FakeDelegation()
    journal = await _open(store, cid, delegation)
    with pytest.raises(ChildrenPending) as parked:
        await journal.exec(Fanout(), [user("go")])
    assert parked.value.call_ids == ("a", "b")
    assert delegation.spawns == ["a", "b"]
    records = await store.read(cid)
    assert kinds(records)[-4:] == ["tool_called", "task_spawned", "tool_called", "task_spawned"]
    assert kinds(records).count("execution_failed") == 0  # a park is not a failure
    intents = [r.payload for r in records if isinstance(r.payload, ToolCalled)]
    assert [intent.mediation for intent in intents] == [Mediation.TASK, Mediation.TASK]


async def test_a_resume_delivers_the_answers_once_and_a_replay_serves_them(store: Store) -> None:
    cid = await new_conversation(store)
    delegation = FakeDelegation()
    with pytest.raises(ChildrenPending):
        await (await _open(store, cid, delegation)).exec(Fanout(), [user("go")])
    delegation.settled = {"a": "A"}
    with pytest.raises(ChildrenPending) as still:
        await (await _open(store, cid, delegation)).resume(Fanout())
    assert still.value.call_ids == ("b",)
    delegation.settled["b"] = "B"
    result = await (await _open(store, cid, delegation)).resume(Fanout())
    assert result.output == "summed: A + B"
    assert delegation.spawns == ["a", "b"]  # resumes re-drive no spawn
    records = await store.read(cid)
    outcomes = [r.payload.call_id for r in records if isinstance(r.payload, ToolOutcome)]
    finished = [r.payload.call_id for r in records if isinstance(r.payload, TaskFinished)]
    assert outcomes == finished == delegation.delivered_calls == ["a", "b"]
    replayed = await (await _open(store, cid, None)).replay(Fanout())
    assert replayed == ["summed: A + B"]


async def test_a_cut_between_the_intent_and_the_spawn_re_drives_the_spawn(store: Store) -> None:
    """The process died admitting the first child: its intent is durable, its spawn is not.
    The resume asks the delegation to spawn that call again (the engine's admission is
    idempotent per call: the same child comes back), and records one spawn per call."""
    cid = await new_conversation(store)
    dying = FakeDelegation()

    async def die(call: ToolCall, intent: Record) -> TaskSpawned:
        dying.spawns.append(call.call_id)
        raise ConnectionError("the process died admitting the child")

    dying.spawn = die  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await (await _open(store, cid, dying)).exec(Fanout(), [user("go")])
    assert kinds(await store.read(cid)).count("task_spawned") == 0
    delegation = FakeDelegation()
    with pytest.raises(ChildrenPending):
        await (await _open(store, cid, delegation)).resume(Fanout())
    assert (dying.spawns, delegation.spawns) == (["a"], ["a", "b"])
    records = await store.read(cid)
    spawned = [r.payload.call_id for r in records if isinstance(r.payload, TaskSpawned)]
    intents = [r.payload.call_id for r in records if isinstance(r.payload, ToolCalled)]
    assert spawned == intents == ["a", "b"]


async def test_a_refused_call_gets_its_error_in_the_intents_commit(store: Store) -> None:
    cid = await new_conversation(store)
    delegation = FakeDelegation(refuse="task: the limit of 8 subagent tasks is reached")
    result = await (await _open(store, cid, delegation)).exec(Fanout(), [user("go")])
    assert result.output == "summed: task: the limit of 8 subagent tasks is reached + " + (
        "task: the limit of 8 subagent tasks is reached"
    )
    assert delegation.spawns == []
    assert "task_spawned" not in kinds(await store.read(cid))


async def test_a_call_refused_at_admission_gets_its_error_after_its_intent(
    store: Store,
) -> None:
    """A limit only the admission can check exactly (a tree's total, another process's spawn
    reaching it first) refuses a call whose intent is durable already: its error is the
    call's outcome, nothing waits, a replay serves it, and a resume of a cut between the
    intent and the refusal asks again."""
    full = "task: the limit of 100 subagent tasks for this task tree is reached"
    cid = await new_conversation(store)
    delegation = FakeDelegation(refuse_at_admission=full)
    result = await (await _open(store, cid, delegation)).exec(Fanout(), [user("go")])
    assert result.output == f"summed: {full} + {full}"
    assert delegation.spawns == ["a", "b"]
    records = await store.read(cid)
    calls = [kind for kind in kinds(records) if kind.startswith(("tool_", "task_"))]
    assert calls == ["tool_called", "tool_outcome", "tool_called", "tool_outcome"]
    outcomes = [r.payload for r in records if isinstance(r.payload, ToolOutcome)]
    assert [(o.content, o.is_error) for o in outcomes] == [(full, True), (full, True)]
    replaying = FakeDelegation()
    assert await (await _open(store, cid, replaying)).replay(Fanout()) == [result.output]
    assert replaying.spawns == []

    cut = await new_conversation(store, "cut")
    dying = FakeDelegation()

    async def die(call: ToolCall, intent: Record) -> TaskSpawned:
        raise ConnectionError("the process died admitting the child")

    dying.spawn = die  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await (await _open(store, cut, dying)).exec(Fanout(), [user("go")])
    resumed = await (await _open(store, cut, delegation)).resume(Fanout())
    assert resumed is not None and resumed.output == f"summed: {full} + {full}"
    assert "task_spawned" not in kinds(await store.read(cut))


async def test_without_a_delegation_a_live_task_call_fails(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    with pytest.raises(MissingToolExecutor):
        await (await _open(store, cid, None)).exec(Fanout(), [user("go")])
    other = await new_conversation(store, "other")
    delegation = FakeDelegation()
    with pytest.raises(ChildrenPending):
        await (await _open(store, other, delegation)).exec(Fanout(), [user("go")])
    # A parked execution is pending, not completed: there is nothing to replay yet.
    assert await (await _open(store, other, None)).replay(Fanout()) == []


async def test_the_model_cannot_be_asked_while_a_child_runs(store: Store) -> None:
    class Eager:
        name, version = "eager", "1"

        async def run(self, turn: Turn) -> JsonValue:
            await turn.delegate(task("a", turn))
            request = ModelRequest(model="test", messages=tuple(turn.inputs))
            return (await turn.model(request)).message.text

    class Forgetful:
        name, version = "forgetful", "1"

        async def run(self, turn: Turn) -> JsonValue:
            await turn.delegate(task("a", turn))
            return "done without waiting"

    for harness, session in ((Eager(), "eager"), (Forgetful(), "forgetful")):
        cid = await new_conversation(store, session)
        with pytest.raises(ChildrenPending):
            await (await _open(store, cid, FakeDelegation())).exec(harness, [user("go")])
        assert "execution_ended" not in kinds(await store.read(cid))


async def test_only_a_task_call_is_delegated(store: Store) -> None:
    class Wrong:
        name, version = "wrong", "1"

        async def run(self, turn: Turn) -> JsonValue:
            call = task("a", turn).model_copy(update={"mediation": Mediation.HOST})
            await turn.delegate(call)
            return None

    cid = await new_conversation(store)
    with pytest.raises(UnmediatedToolCall):
        await (await _open(store, cid, FakeDelegation())).exec(Wrong(), [user("go")])
