"""Replay (I0, I1, I5): served from the log alone, read-only, divergence is detected."""

import gc
from pathlib import Path

import pytest
from pydantic import JsonValue

from tether.errors import HarnessMismatch, IncompleteInvocation, InvalidExecutionLog, ReplayDiverged
from tether.journal import Journal, Turn
from tether.journal._history import Transcript
from tether.messages import Message, ModelRequest, ToolResult
from tether.models import ScriptedModel
from tether.records import ExecutionStarted, Record, RecordDraft, UserMessage
from tether.store import MemoryStore, SqliteStore, Store
from tether.testing import CountingModel, RecordingTools

from .harnesses import EchoHarness, LoopHarness, journal, new_conversation, planning_model, user


class Forbidden(ScriptedModel):
    """Fails the test if called."""

    def __init__(self) -> None:
        super().__init__(lambda request: AssertionError("the model was called during replay"))


async def test_replay_serves_recorded_completions_of_a_nondeterministic_model(store: Store) -> None:
    cid = await new_conversation(store)
    model = CountingModel()
    j = await journal(store, cid, model=model)
    live = [(await j.exec(EchoHarness(), [user(t)])).output for t in ("a", "b")]
    assert live == ["resp#1", "resp#2"]
    before = await store.read(cid)
    outputs = await (await Journal.open(store, cid, fence=0, model=Forbidden())).replay(
        EchoHarness()
    )
    assert outputs == live and model.invocations == 2
    assert await store.read(cid) == before  # read-only


async def test_replay_across_a_restart(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path) as store:
        cid = await new_conversation(store)
        tools = RecordingTools()
        j = await journal(store, cid, model=planning_model(), tools=tools)
        live = (await j.exec(LoopHarness(), [user("lookup and charge")])).output
    async with await SqliteStore.open(tmp_path) as store:
        replayer = await Journal.open(store, cid, fence=0)
        assert await replayer.replay(LoopHarness()) == [live]
        assert await store.verify(cid) > 0
    assert sum(tools.executions.values()) == 2


async def test_i0_a_different_model_input_diverges(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=CountingModel())).exec(EchoHarness(), [user("hi")])

    class Flaky(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            request = ModelRequest(model="test", messages=(Message.user("something else"),))
            return (await turn.model(request)).message.text

    before = await store.read(cid)
    with pytest.raises(ReplayDiverged, match="I0"):
        await (await Journal.open(store, cid, fence=0)).replay(Flaky())
    assert await store.read(cid) == before


async def test_output_mismatch_diverges(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=ScriptedModel(["x"]))).exec(EchoHarness(), [user("hi")])

    class Other(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            await super().run(turn)
            return "goodbye"

    with pytest.raises(ReplayDiverged, match="output mismatch"):
        await (await Journal.open(store, cid, fence=0)).replay(Other())


async def test_under_consumption_diverges(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=CountingModel())).exec(EchoHarness(), [user("hi")])

    class Lazy(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            return "resp#1"

    with pytest.raises(ReplayDiverged, match="consumed 0 of 2"):
        await (await Journal.open(store, cid, fence=0)).replay(Lazy())


async def test_over_consumption_diverges_and_sticks(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=CountingModel())).exec(EchoHarness(), [user("hi")])
    errors: list[str] = []

    class Greedy(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            text = await super().run(turn)
            try:
                await super().run(turn)
            except ReplayDiverged as exc:
                errors.append(type(exc).__name__)
            for call in (turn.report(ToolResult(call_id="r", content="x")), turn.steering()):
                try:
                    await call
                except ReplayDiverged as exc:
                    errors.append(type(exc).__name__)
            return text

    with pytest.raises(ReplayDiverged):
        await (await Journal.open(store, cid, fence=0)).replay(Greedy())
    assert errors == ["ReplayDiverged"] * 3


async def test_turn_boundaries_come_from_execution_ids(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=CountingModel())
    await j.exec(EchoHarness(), [user("same"), user("same")])
    await j.exec(EchoHarness(), [user("next")])
    seen: list[tuple[int, list[str]]] = []

    class Spy(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            seen.append((len(turn.history), [m.text for m in turn.inputs]))
            return await super().run(turn)

    assert await (await Journal.open(store, cid, fence=0)).replay(Spy()) == ["resp#1", "resp#2"]
    assert seen == [(0, ["same", "same"]), (3, ["next"])]


async def test_incomplete_executions_are_skipped(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=ScriptedModel(["ok", RuntimeError("down")]))
    await j.exec(EchoHarness(), [user("one")])
    with pytest.raises(RuntimeError):
        await j.exec(EchoHarness(), [user("two")])
    assert await (await Journal.open(store, cid, fence=0)).replay(EchoHarness()) == ["ok"]


async def test_malformed_executions_fail_before_any_run(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=ScriptedModel(["ok"]))
    await j.exec(EchoHarness(), [user("one")])
    # A second, completed-looking execution that declares two inputs but records one.
    drafts = [
        RecordDraft(
            ExecutionStarted(harness="echo", harness_version="1", input_count=2), execution_id="bad"
        ),
        RecordDraft(UserMessage(body="x"), execution_id="bad"),
    ]
    await store.append(cid, drafts, expected_seq=await store.head(cid), fence=j.log.store_fence)
    runs: list[int] = []

    class Count(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            runs.append(1)
            return await super().run(turn)

    with pytest.raises(IncompleteInvocation):
        await (await Journal.open(store, cid)).resume(Count())
    assert runs == []
    orphan = RecordDraft(UserMessage(body="y"), execution_id="never-started")
    await store.append(
        cid, [orphan], expected_seq=await store.head(cid), fence=j.log.store_fence + 10
    )
    with pytest.raises(InvalidExecutionLog):
        await (await Journal.open(store, cid, fence=0)).replay(Count())
    assert runs == []


async def test_harness_identity_is_preflighted(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=CountingModel())).exec(EchoHarness(), [user("hi")])

    class V2(EchoHarness):
        version = "2"

    class Other(EchoHarness):
        name = "other"

    for harness in (V2(), Other()):
        with pytest.raises(HarnessMismatch):
            await (await Journal.open(store, cid, fence=0)).replay(harness)


async def test_i2_the_whole_assistant_message_round_trips(store: Store) -> None:
    from tether.messages import ModelResponse, TextPart, ThinkingPart, ToolCallPart, Usage

    message = Message(
        role="assistant",
        parts=(
            ThinkingPart(
                text="let me think",
                signature="sig==",
                opaque="gAAAA\u2028opaque",
                provider="p",
                id="rs_1",
            ),
            TextPart(text="answer"),
            ToolCallPart(call_id="c9", name="noop", args={"x": 1.5}, signature="thought-sig"),
        ),
    )
    live = ModelResponse(
        message=message, usage=Usage(input_tokens=0, output_tokens=7), finish_reason="stop"
    )
    served: list[ModelResponse] = []

    class Keep(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            served.append(await turn.model(ModelRequest(model="test", messages=tuple(turn.inputs))))
            return "ok"

    cid = await new_conversation(store)
    await (await journal(store, cid, model=ScriptedModel([live]))).exec(Keep(), [user("hi")])
    await (await Journal.open(store, cid, fence=0)).replay(Keep())
    assert served[0] == served[1] == live
    assert served[1].usage is not None and served[1].usage.input_tokens == 0  # a real 0 stays 0


class Watching(EchoHarness):
    """Echo that keeps what each turn was given, and whether the collector ran meanwhile."""

    def __init__(self, *, reads_history: bool = True) -> None:
        self.reads_history = reads_history
        self.turns: list[tuple[list[Message], list[Message]]] = []
        self.collector: list[bool] = []

    async def run(self, turn: Turn) -> JsonValue:
        self.collector.append(gc.isenabled())
        history = turn.history if self.reads_history else []
        self.turns.append((history, turn.inputs))
        request = ModelRequest(model="test", messages=(*history, *turn.inputs))
        return (await turn.model(request)).message.text


@pytest.mark.parametrize("replayed", [False, True], ids=["live", "replay"])
async def test_a_turns_messages_come_back_as_the_very_same_objects(
    store: Store, replayed: bool
) -> None:
    """The next turn's history holds this turn's input and answer themselves, not copies:
    the model-input hash of a re-sent history resumes on their identity."""
    cid = await new_conversation(store)
    watching = Watching()
    j = await journal(store, cid, model=CountingModel())
    for text in ("a", "b"):
        await j.exec(watching, [user(text)])
    if replayed:
        watching = Watching()
        await (await Journal.open(store, cid, fence=0)).replay(watching)
    (_, [first_input]), (history, _) = watching.turns
    assert history[0] is first_input
    assert history[1].text == "resp#1"


@pytest.mark.parametrize("reads_history", [False, True])
async def test_replay_transcribes_only_for_a_harness_that_reads_its_history(
    store: Store, monkeypatch: pytest.MonkeyPatch, reads_history: bool
) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=CountingModel())
    for text in ("a", "b", "c"):
        await j.exec(Watching(reads_history=reads_history), [user(text)])
    transcribed: list[int] = []
    add = Transcript.add

    def counting_add(self: Transcript, record: Record) -> None:
        transcribed.append(record.seq)
        add(self, record)

    monkeypatch.setattr(Transcript, "add", counting_add)
    watching = Watching(reads_history=reads_history)
    outputs = await (await Journal.open(store, cid, fence=0)).replay(watching)
    assert outputs == ["resp#1", "resp#2", "resp#3"]
    if reads_history:
        assert [len(history) for history, _ in watching.turns] == [0, 2, 4]
        assert transcribed == sorted(set(transcribed))  # each record transcribed once
    else:
        assert transcribed == []


@pytest.mark.parametrize("app_disabled_it", [False, True])
async def test_a_replay_pauses_the_collector_and_leaves_it_as_it_was(
    app_disabled_it: bool,
) -> None:
    store = MemoryStore()
    cid = await new_conversation(store)
    j = await journal(store, cid, model=CountingModel())
    watching = Watching(reads_history=False)
    for _ in range(3):
        await j.exec(watching, [user("again")])
    assert all(watching.collector)  # live turns leave it alone
    watching = Watching(reads_history=False)
    if app_disabled_it:
        gc.disable()
    try:
        await (await Journal.open(store, cid, fence=0)).replay(watching)
        assert watching.collector and not any(watching.collector)
        assert gc.isenabled() is not app_disabled_it
    finally:
        gc.enable()
