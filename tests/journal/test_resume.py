"""Resume (I3, I4): serve the recorded prefix, go live after the crash point, at most once."""

from typing import Any

import pytest
from pydantic import JsonValue

from tether.errors import Fenced, RecordedModelFailure, ReplayDiverged
from tether.journal import UNKNOWN_OUTCOME, Journal, Turn
from tether.messages import ModelRequest, ToolCall, ToolOutcomeStatus, ToolResult
from tether.models import ScriptedModel
from tether.store import MemoryStore, Store
from tether.testing import CountingModel, RecordingTools, copy_prefix

from .harnesses import EchoHarness, LoopHarness, journal, new_conversation, planning_model, user
from .test_exec import kinds


async def cut_after(store: Store, cid: str, kind: str, occurrence: int = 1) -> Store:
    """A fresh store holding the log up to the ``occurrence``-th record of ``kind``."""
    records = await store.read(cid)
    seqs = [r.seq for r in records if r.kind == kind]
    target = MemoryStore()
    await copy_prefix(store, cid, seqs[occurrence - 1], target)
    return target


async def test_nothing_to_resume(store: Store) -> None:
    cid = await new_conversation(store)
    j = await journal(store, cid, model=CountingModel())
    assert not (await j.resume(EchoHarness())).resumed
    await j.exec(EchoHarness(), [user("hi")])
    result = await j.resume(EchoHarness())
    assert not result.resumed and result.execution_id is None


async def test_crash_after_the_completion_makes_no_model_call(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=CountingModel())).exec(EchoHarness(), [user("hi")])
    cut = await cut_after(store, cid, "assistant_message_completed")
    model = CountingModel()
    result = await (await journal(cut, cid, model=model)).resume(EchoHarness())
    assert result.resumed and result.output == "resp#1" and model.invocations == 0
    assert kinds(await cut.read(cid))[-1] == "execution_ended"
    assert not (await (await journal(cut, cid)).resume(EchoHarness())).resumed


async def test_crash_after_the_model_intent_invokes_once(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=CountingModel())).exec(EchoHarness(), [user("hi")])
    cut = await cut_after(store, cid, "model_called")
    model = CountingModel()
    result = await (await journal(cut, cid, model=model)).resume(EchoHarness())
    assert model.invocations == 1 and result.output == "resp#1"
    assert kinds(await cut.read(cid))[1:] == [
        "execution_started",
        "user_message",
        "model_called",
        "assistant_message_completed",
        "execution_ended",
    ]
    assert await (await Journal.open(cut, cid, fence=0)).replay(EchoHarness()) == ["resp#1"]


async def test_provider_error_then_resume(store: Store) -> None:
    cid = await new_conversation(store)
    model = ScriptedModel([RuntimeError("down"), RuntimeError("down"), "fine"])
    j = await journal(store, cid, model=model)
    with pytest.raises(RuntimeError):
        await j.exec(EchoHarness(), [user("hi")])
    with pytest.raises(RuntimeError):
        await j.resume(EchoHarness())
    result = await j.resume(EchoHarness())
    assert result.output == "fine" and model.invocations == 3
    assert kinds(await store.read(cid))[3:] == [
        "model_called",
        "execution_failed",
        "execution_failed",
        "assistant_message_completed",
        "execution_ended",
    ]


async def test_re_drive_with_a_different_input_diverges_without_a_call(store: Store) -> None:
    cid = await new_conversation(store)
    await (await journal(store, cid, model=CountingModel())).exec(EchoHarness(), [user("hi")])
    cut = await cut_after(store, cid, "model_called")

    class Flaky(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            return (await turn.model(ModelRequest(model="other", messages=()))).message.text

    model = CountingModel()
    with pytest.raises(ReplayDiverged, match="I0"):
        await (await journal(cut, cid, model=model)).resume(Flaky())
    assert model.invocations == 0 and kinds(await cut.read(cid))[-1] == "execution_failed"
    assert (await (await journal(cut, cid, model=model)).resume(EchoHarness())).output == "resp#1"


async def test_a_handled_model_failure_is_not_re_driven(store: Store) -> None:
    cid = await new_conversation(store)

    class Resilient(EchoHarness):
        async def run(self, turn: Turn) -> JsonValue:
            try:
                return await super().run(turn)
            except (RuntimeError, RecordedModelFailure):
                return (await turn.step("fallback", _fallback)) or "fallback"

    model = ScriptedModel([RuntimeError("down")])
    await (await journal(store, cid, model=model)).exec(Resilient(), [user("hi")])
    cut = await cut_after(store, cid, "step_recorded")
    again = CountingModel()
    assert (await (await journal(cut, cid, model=again)).resume(Resilient())).output == "fallback"
    assert again.invocations == 0
    assert await (await Journal.open(store, cid, fence=0)).replay(Resilient()) == ["fallback"]


async def _fallback() -> JsonValue:
    return "fallback"


async def test_interrupted_non_idempotent_tool_gets_unknown(store: Store) -> None:
    cid = await new_conversation(store)
    tools = RecordingTools()
    await (await journal(store, cid, model=planning_model(), tools=tools)).exec(
        LoopHarness(), [user("charge")]
    )
    cut = await cut_after(store, cid, "tool_called")
    again = RecordingTools()
    result = await (await journal(cut, cid, model=planning_model(), tools=again)).resume(
        LoopHarness()
    )
    assert result.output == "done after 1 tool results" and sum(again.executions.values()) == 0
    outcome = [r.payload for r in await cut.read(cid) if r.kind == "tool_outcome"]
    assert outcome[0].status is ToolOutcomeStatus.UNKNOWN and outcome[0].content == UNKNOWN_OUTCOME  # type: ignore[attr-defined]


async def test_interrupted_idempotent_tool_is_re_driven_under_its_key(store: Store) -> None:
    cid = await new_conversation(store)
    tools = RecordingTools()
    await (await journal(store, cid, model=planning_model(), tools=tools)).exec(
        LoopHarness(), [user("lookup")]
    )
    cut = await cut_after(store, cid, "tool_called")
    tools.calls.clear()
    result = await (await journal(cut, cid, model=planning_model(), tools=tools)).resume(
        LoopHarness()
    )
    assert result.output == "done after 1 tool results"
    [key] = tools.executions
    assert tools.executions[key] == 2 and len(tools.effects) == 1  # ran again, deduplicated
    assert len([r for r in await cut.read(cid) if r.kind == "tool_outcome"]) == 1


async def test_only_new_calls_reach_the_executor(store: Store) -> None:
    cid = await new_conversation(store)
    tools = RecordingTools()
    await (await journal(store, cid, model=planning_model(), tools=tools)).exec(
        LoopHarness(), [user("lookup and charge")]
    )
    cut = await cut_after(store, cid, "tool_outcome", 1)
    again = RecordingTools()
    await (await journal(cut, cid, model=planning_model(), tools=again)).resume(LoopHarness())
    assert [call.name for call in again.calls] == ["charge"]


async def test_tool_identity_divergence(store: Store) -> None:
    cid = await new_conversation(store)
    tools = RecordingTools()
    await (await journal(store, cid, model=planning_model(), tools=tools)).exec(
        LoopHarness(), [user("lookup")]
    )

    class Tamper(LoopHarness):
        def __init__(self, change: dict[str, Any]) -> None:
            self.change = change

        async def run(self, turn: Turn) -> JsonValue:
            original = turn.tool

            async def tool(call: ToolCall) -> ToolResult:
                return await original(call.model_copy(update=self.change))

            turn.tool = tool  # type: ignore[method-assign,assignment]
            return await super().run(turn)

    changes: list[dict[str, Any]] = [
        {"call_id": "x"},
        {"name": "charge"},
        {"args": {"q": 1}},
        {"idempotency_key": "k2"},
    ]
    for change in changes:
        for cut in (store, await cut_after(store, cid, "tool_called")):
            again = RecordingTools()
            with pytest.raises(ReplayDiverged):
                if cut is store:
                    await (await Journal.open(store, cid, fence=0)).replay(Tamper(change))
                else:
                    await (await journal(cut, cid, model=planning_model(), tools=again)).resume(
                        Tamper(change)
                    )
            assert sum(again.executions.values()) == 0


async def test_json_equal_args_are_the_same_call(store: Store) -> None:
    cid = await new_conversation(store)
    tools = RecordingTools()
    seen: list[object] = []

    class Args(LoopHarness):
        def __init__(self, value: JsonValue) -> None:
            self.value = value

        async def run(self, turn: Turn) -> JsonValue:
            result = await turn.tool(
                ToolCall(
                    call_id="c1", name="lookup", args={"n": self.value, "a": 1}, idempotency_key="k"
                )
            )
            seen.append(result.content)
            return result.content

    await (await journal(store, cid, tools=tools)).exec(Args(2), [])
    assert await (await Journal.open(store, cid, fence=0)).replay(Args(2.0)) == [seen[0]]
    assert tools.calls[0].args == {"n": 2, "a": 1}


async def test_a_stale_writer_is_fenced_after_a_resume(store: Store) -> None:
    cid = await new_conversation(store)
    slow = ScriptedModel(["late"])
    stale = await journal(store, cid, model=slow)
    with pytest.raises(RuntimeError):
        await (await journal(store, cid, model=ScriptedModel([RuntimeError("crash")]))).exec(
            EchoHarness(), [user("hi")]
        )
    fresh = await journal(store, cid, model=CountingModel())
    assert (await fresh.resume(EchoHarness())).output == "resp#1"
    with pytest.raises(Fenced):
        await stale.exec(EchoHarness(), [user("zombie")])
