"""Exec: the journal shape, the CAS-guarded start, streaming, observers and sealing."""

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import pytest
from pydantic import JsonValue

from tether.errors import Conflict, Fenced, JournalError, TurnClosed
from tether.journal import Journal, JournalHooks, ToolScope, Turn
from tether.messages import ModelRequest, ModelResponse, ToolCall, ToolResult
from tether.models import DeltaSink, ScriptedModel, StreamDelta
from tether.records import AssistantTextDelta, ExecutionStarted, Record
from tether.store import SessionKey, SqliteStore, Store
from tether.testing import CountingModel, RecordingTools

from .harnesses import EchoHarness, LoopHarness, journal, new_conversation, planning_model, user


def kinds(records: Sequence[Record]) -> list[str]:
    return [r.kind for r in records]


async def test_exec_journal_shape(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=ScriptedModel(["echo:hi"]))
    result = await j.exec(EchoHarness(), [user("hi")])
    records = await store.read(cid)
    assert kinds(records) == [
        "conversation_created",
        "execution_started",
        "user_message",
        "model_called",
        "assistant_message_completed",
        "execution_ended",
    ]
    assert {r.execution_id for r in records[1:]} == {result.execution_id}
    start = records[1].payload
    assert isinstance(start, ExecutionStarted)
    assert (start.harness, start.harness_version, start.input_count) == ("echo", "1", 1)
    assert result.output == "echo:hi" and result.model_invocations == 1
    assert await store.verify(cid) == 6


async def test_the_first_append_is_cas_guarded(store: Store) -> None:
    cid = await new_conversation(store)
    model = CountingModel()
    j = await journal(store, cid, model=model)
    await j.exec(EchoHarness(), [user("one")])
    head = await store.head(cid)
    with pytest.raises(Conflict):
        await j.exec(EchoHarness(), [user("two")], expected_seq=1)
    assert await store.head(cid) == head and model.invocations == 1


async def test_a_superseded_writer_never_runs_its_harness(store: Store) -> None:
    cid = await new_conversation(store)
    model = CountingModel()
    stale = await journal(store, cid, model=model)
    await journal(store, cid)  # mints a newer fence
    with pytest.raises(Fenced):
        await stale.exec(EchoHarness(), [user("hi")])
    assert model.invocations == 0 and await store.head(cid) == 1


async def test_open_session_creates_the_conversation_and_a_later_opener_supersedes_it(
    store: Store,
) -> None:
    key = SessionKey("support", "acme", "ticket-42")
    first = await Journal.open_session(store, key, conversation_id="c-42", model=CountingModel())
    assert first.conversation.id == "c-42" and first.head == 1
    assert (await store.find_conversation(key)).id == "c-42"
    await first.exec(EchoHarness(), [user("one")])
    second = await Journal.open_session(store, key, conversation_id="ignored")
    assert second.conversation.id == "c-42" and second.head == await store.head("c-42")
    head = second.head
    with pytest.raises(Fenced):  # the creator held fence 0; the second opener minted 1
        await first.exec(EchoHarness(), [user("two")])
    assert await store.head("c-42") == head


async def test_open_session_of_a_new_session_costs_one_commit(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path) as store:
        before = store.commits
        journal = await Journal.open_session(store, SessionKey("a", "b"), model=CountingModel())
        assert store.commits == before + 1
        assert (await journal.exec(EchoHarness(), [user("hi")])).output == "resp#1"
        assert await store.verify(journal.conversation.id) == 6


async def test_start_and_inputs_are_durable_before_the_harness_runs(store: Store) -> None:
    cid = await new_conversation(store)
    seen: list[str] = []

    class Peek:
        name, version = "peek", "1"

        async def run(self, turn: Turn) -> JsonValue:
            seen.extend(kinds(await store.read(cid)))
            return [m.text for m in turn.inputs]

    result = await (await journal(store, cid)).exec(
        Peek(), [user("a"), user("b")], config={"k": "v"}
    )
    assert seen == ["conversation_created", "execution_started", "user_message", "user_message"]
    assert result.output == ["a", "b"]


async def test_a_harness_error_records_execution_failed_not_ended(store: Store) -> None:
    cid = await new_conversation(store)

    class Broken:
        name, version = "broken", "1"

        async def run(self, turn: Turn) -> JsonValue:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await (await journal(store, cid)).exec(Broken(), [user("x")])
    records = await store.read(cid)
    assert records[-1].kind == "execution_failed"
    assert (await (await journal(store, cid)).pending()) is not None  # still resumable


async def test_history_is_the_transcript_before_the_execution(store: Store) -> None:
    cid = await new_conversation(store)
    model = ScriptedModel(lambda r: f"n={len(r.messages)}")
    j = await journal(store, cid, model=model)
    assert (await j.exec(EchoHarness(), [user("one")])).output == "n=1"
    assert (await j.exec(EchoHarness(), [user("two")])).output == "n=3"
    assert [m.text for m in model.calls[1].messages] == ["one", "n=1", "two"]


async def test_config_is_copied(store: Store) -> None:
    cid = await new_conversation(store)
    config: dict[str, JsonValue] = {"temperature": 0.5}

    class Mutate:
        name, version = "mutate", "1"

        async def run(self, turn: Turn) -> JsonValue:
            assert turn.config is not None
            turn.config["temperature"] = 9
            return None

    await (await journal(store, cid)).exec(Mutate(), [user("x")], config=config)
    start = (await store.read(cid))[1].payload
    assert isinstance(start, ExecutionStarted) and start.config == {"temperature": 0.5}
    assert config == {"temperature": 0.5}


class Observer:
    def __init__(self) -> None:
        self.records: list[Record] = []
        self.deltas: list[str] = []

    async def on_record(self, records: Sequence[Record]) -> None:
        self.records.extend(records)

    async def on_delta(self, execution_id: str, call_id: str, delta: StreamDelta) -> None:
        self.deltas.append(delta.text)


async def test_streamed_deltas_reach_the_observer_and_batch_into_records(store: Store) -> None:
    cid = await new_conversation(store)
    observer = Observer()
    model = ScriptedModel(["hello world"], chunk=3)
    j = await Journal.open(store, cid, model=model, hooks=JournalHooks(observer=observer))
    await j.exec(EchoHarness(), [user("hi")])
    assert observer.deltas == ["hel", "lo ", "wor", "ld"]
    records = await store.read(cid)
    assert kinds(records)[3:7] == [
        "model_called",
        "assistant_message_started",
        "assistant_text_delta",
        "assistant_message_completed",
    ]
    deltas = [r.payload for r in records if isinstance(r.payload, AssistantTextDelta)]
    assert "".join(delta.text for delta in deltas) == "hello world"
    assert [r.seq for r in observer.records] == [r.seq for r in records[1:]]


async def test_a_provider_error_mid_stream_closes_the_message(store: Store) -> None:
    cid = await new_conversation(store)

    class Cut:
        calls = 0

        async def request(
            self, request: ModelRequest, stream: DeltaSink | None = None
        ) -> ModelResponse:
            assert callable(stream)
            await stream(StreamDelta("text", "partial"))
            raise ConnectionError("stream cut")

    j = await Journal.open(store, cid, model=Cut())
    with pytest.raises(ConnectionError):
        await j.exec(EchoHarness(), [user("hi")])
    records = await store.read(cid)
    closing = [r for r in records if r.kind == "assistant_message_completed"]
    assert len(closing) == 1 and closing[0].payload.interrupted  # type: ignore[attr-defined]
    assert records[-1].kind == "execution_failed"
    pending = await j.pending()
    assert pending is not None and [r.kind for r in pending.effects] == ["model_called"]


async def test_the_turn_is_sealed_after_the_harness_returns(store: Store) -> None:
    cid = await new_conversation(store)
    kept: list[Turn] = []

    class Keep:
        name, version = "keep", "1"

        async def run(self, turn: Turn) -> JsonValue:
            kept.append(turn)
            return None

    j = await journal(store, cid, model=CountingModel(), tools=RecordingTools())
    await j.exec(Keep(), [])
    head = await store.head(cid)
    turn = kept[0]
    calls = [
        turn.model(ModelRequest(model="m", messages=())),
        turn.tool(ToolCall(call_id="c", name="t", idempotency_key="k")),
        turn.report(ToolResult(call_id="c", content="x")),
        turn.step("s", lambda: _value()),
        turn.steering(),
    ]
    for call in calls:
        with pytest.raises(TurnClosed):
            await call
    assert await store.head(cid) == head


async def _value() -> JsonValue:
    return 1


async def test_a_value_that_is_not_json_fails_the_execution(store: Store) -> None:
    cid = await new_conversation(store)

    class Weird:
        name, version = "weird", "1"

        async def run(self, turn: Turn) -> JsonValue:
            return object()  # type: ignore[return-value]

    with pytest.raises(JournalError, match="not JSON"):
        await (await journal(store, cid)).exec(Weird(), [])
    assert (await store.read(cid))[-1].kind == "execution_failed"


async def test_tool_loop_records_intent_before_outcome(store: Store) -> None:
    cid = await new_conversation(store)
    tools = RecordingTools()
    seen_at_execution: list[str] = []

    async def lookup(call: ToolCall, scope: ToolScope) -> JsonValue:
        seen_at_execution.append((await store.read(cid))[-1].kind)
        return "sunny"

    tools.tools["lookup"] = lookup
    j = await journal(store, cid, model=planning_model(), tools=tools)
    result = await j.exec(LoopHarness(), [user("lookup the weather")])
    assert result.output == "done after 1 tool results"
    assert seen_at_execution == ["tool_called"]  # write-ahead: the intent is durable first
    assert kinds(await store.read(cid))[3:] == [
        "model_called",
        "assistant_message_completed",
        "tool_called",
        "tool_outcome",
        "model_called",
        "assistant_message_completed",
        "execution_ended",
    ]


# --- a deferred start ------------------------------------------------------------------


class _CountingAppends:
    """Counts the store's appends (each one commit)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = store.append

        async def counting(*args: object, **kwargs: object) -> list[Record]:
            self.count += 1
            return await real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "append", counting)


async def test_a_deferred_start_rides_the_executions_end(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start and inputs commit with the first durable write: for a turn without a tool,
    its end, so the whole execution is one commit with the same records as ever."""
    cid = await new_conversation(store)
    j = await journal(store, cid, model=ScriptedModel(["echo:hi"]))
    appends = _CountingAppends(store, monkeypatch)
    result = await j.exec(EchoHarness(), [user("hi")], expected_seq=1, defer_start=True)
    assert appends.count == 1
    records = await store.read(cid)
    assert kinds(records)[1:] == [
        "execution_started",
        "user_message",
        "model_called",
        "assistant_message_completed",
        "execution_ended",
    ]
    assert {r.execution_id for r in records[1:]} == {result.execution_id}
    assert await store.verify(cid) == 6


async def test_a_deferred_start_on_a_moved_log_invokes_nothing(store: Store) -> None:
    cid = await new_conversation(store)
    model = CountingModel()
    j = await journal(store, cid, model=model)
    await j.exec(EchoHarness(), [user("one")])
    head = await store.head(cid)
    with pytest.raises(Conflict):
        await j.exec(EchoHarness(), [user("two")], expected_seq=1, defer_start=True)
    assert await store.head(cid) == head and model.invocations == 1


async def test_a_deferred_start_keeps_the_inputs_messages(store: Store) -> None:
    """The history of the next execution hands the harness the very objects its inputs were
    (a harness that re-sends its history hashes only what each call adds)."""
    seen: list[object] = []

    class Keeping(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            seen.extend(turn.inputs)
            return await super().run(turn)

    cid = await new_conversation(store)
    j = await journal(store, cid, model=ScriptedModel(["echo:hi"]))
    await j.exec(Keeping(), [user("hi")], expected_seq=1, defer_start=True)
    history = (await j.refresh()).messages()
    assert any(message is seen[0] for message in history)


async def test_a_slow_model_call_writes_what_is_held_behind_first(store: Store) -> None:
    """Readers of the log see a turn under way whose model is slow to answer."""
    seen_during_call: list[int] = []

    class Slow(ScriptedModel):
        async def request(
            self, request: ModelRequest, stream: DeltaSink | None = None
        ) -> ModelResponse:
            async with asyncio.timeout(60):  # until the flush lands
                await store.wait_for_append(cid, after_seq=1)
            seen_during_call.append(await store.head(cid))
            return await super().request(request, None)

    cid = await new_conversation(store)
    j = await journal(store, cid, model=Slow(["echo:hi"]))
    await j.exec(EchoHarness(), [user("hi")], expected_seq=1, defer_start=True)
    assert seen_during_call == [4]  # start, input and the model call's intent
    assert kinds(await store.read(cid))[-2:] == ["assistant_message_completed", "execution_ended"]


async def test_the_model_is_awaited_in_the_harness_task(store: Store) -> None:
    """No task of its own for a model call (a task and a wait cost about 5% of a turn)."""
    tasks: list[asyncio.Task[object] | None] = []

    class Seeing(ScriptedModel):
        async def request(
            self, request: ModelRequest, stream: DeltaSink | None = None
        ) -> ModelResponse:
            tasks.append(asyncio.current_task())
            return await super().request(request, stream)

    class Harness(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            tasks.append(asyncio.current_task())
            return await super().run(turn)

    cid = await new_conversation(store)
    j = await journal(store, cid, model=Seeing(["echo:hi"]))
    await j.exec(Harness(), [user("hi")], expected_seq=1, defer_start=True)
    assert len(tasks) == 2 and tasks[0] is tasks[1]


class _SlowUntil(ScriptedModel):
    """Answers once ``ready`` is set (a minute at most), after ``first`` has run."""

    def __init__(
        self, ready: asyncio.Event, first: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        super().__init__(["echo:hi"])
        self.ready, self.first = ready, first

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        if self.first is not None:
            await self.first()
        await asyncio.wait_for(self.ready.wait(), 60)
        return await super().request(request, None)


async def test_a_flush_that_fails_during_a_slow_call_fails_the_turn_once_answered(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer took the log over while the model thought: the flush's refusal is the
    execution's error, and no task is left behind with it."""
    cid = await new_conversation(store)
    refused = asyncio.Event()
    real = store.append

    async def watching(*args: object, **kwargs: object) -> list[Record]:
        try:
            return await real(*args, **kwargs)  # type: ignore[arg-type]
        except Conflict:  # the log moved on (checked before the fence)
            refused.set()
            raise

    async def another_writer() -> None:
        other = await Journal.open(store, cid)  # the next fence
        await other.log.append([other.log.draft(user("meanwhile"), None)])

    monkeypatch.setattr(store, "append", watching)
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: unhandled.append(context))
    j = await journal(store, cid, model=_SlowUntil(refused, another_writer))
    before = asyncio.all_tasks()  # this one, and any the store runs
    with pytest.raises(Conflict):
        await j.exec(EchoHarness(), [user("hi")], expected_seq=1, defer_start=True)
    assert asyncio.all_tasks() == before
    assert unhandled == []
    assert kinds(await store.read(cid)) == ["conversation_created", "user_message"]


async def test_a_call_cancelled_while_its_flush_commits_waits_for_the_flush(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the flush writes is written whole before the cancellation goes on: no task
    outlives the call."""
    cid = await new_conversation(store)
    flushing, release = asyncio.Event(), asyncio.Event()
    real = store.append

    async def held(*args: object, **kwargs: object) -> list[Record]:
        flushing.set()
        await release.wait()
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "append", held)
    j = await journal(store, cid, model=_SlowUntil(asyncio.Event()))  # never answers
    before = asyncio.all_tasks()
    run = asyncio.ensure_future(
        j.exec(EchoHarness(), [user("hi")], expected_seq=1, defer_start=True)
    )
    await asyncio.wait_for(flushing.wait(), 60)
    run.cancel()
    await asyncio.sleep(0)  # one loop iteration: the cancellation is delivered
    assert not run.done()  # the flush is still committing
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert asyncio.all_tasks() == before
    written = kinds(await store.read(cid))
    assert written[1:4] == ["execution_started", "user_message", "model_called"]


async def test_a_run_cancelled_while_its_deltas_commit_records_its_start_before_its_failure(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An abort lands while the first delta flush (which carries the execution's start, its
    input and the call's intent) waits on the store: the cut batch is written with the
    interrupted call's records, before the failure, not lost."""
    cid = await new_conversation(store)
    flushing, release = asyncio.Event(), asyncio.Event()
    real = store.append

    async def held(*args: object, **kwargs: object) -> list[Record]:
        if not flushing.is_set():
            flushing.set()
            await release.wait()  # the cancellation lands here, before the store has it
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    class Streaming(ScriptedModel):
        async def request(
            self, request: ModelRequest, stream: DeltaSink | None = None
        ) -> ModelResponse:
            assert stream is not None
            await stream(StreamDelta("text", "x" * 2048))  # past FLUSH_BYTES: flushed now
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    monkeypatch.setattr(store, "append", held)
    j = await journal(store, cid, model=Streaming([]))
    run = asyncio.ensure_future(
        j.exec(EchoHarness(), [user("hi")], expected_seq=1, defer_start=True)
    )
    await asyncio.wait_for(flushing.wait(), 60)
    run.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    written = kinds(await store.read(cid))
    assert written[1:4] == ["execution_started", "user_message", "model_called"]
    assert written[-2:] == ["assistant_message_completed", "execution_failed"]
    assert "assistant_text_delta" in written
