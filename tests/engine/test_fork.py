"""Runtime.fork: a cut between a tool call and its result is repaired, and says so."""

from __future__ import annotations

from collections.abc import Callable

from tether.engine import Fork, Runtime
from tether.journal import Journal
from tether.messages import ModelRequest, ModelResponse, ToolResultPart
from tether.models import ScriptedModel
from tether.records import ToolCalled
from tether.store import Store
from tether.testing import RecordingTools

from ..journal.harnesses import LoopHarness, planner
from .agents import agent

Make = Callable[..., Runtime]


def _recording_planner(seen: list[ModelRequest]) -> ScriptedModel:
    def reply(request: ModelRequest) -> ModelResponse | str:
        seen.append(request)
        return planner(request)

    return ScriptedModel(reply)


async def test_a_fork_between_a_tool_call_and_its_result_repairs_the_cut(
    make_runtime: Make, store: Store
) -> None:
    seen: list[ModelRequest] = []
    definition = agent(LoopHarness(), _recording_planner(seen), RecordingTools())
    async with make_runtime({"loop": definition}) as runtime:
        first = await runtime.dispatch("loop", "acme", "charge the card")
        await runtime.wait(first.submission_id)
        records = await runtime.records(first.conversation_id)
        called = next(r for r in records if r.kind == "tool_called")
        assert records[called.seq].kind == "tool_outcome"  # its result follows the cut
        assert isinstance(called.payload, ToolCalled)
        call_id = called.payload.call_id

        fork = await runtime.fork(first.conversation_id, at_seq=called.seq, session="what-if")
        assert isinstance(fork, Fork) and fork.key.session == "what-if"
        assert fork.repaired_calls == [call_id]
        [repair] = fork.repaired
        assert repair.seq == called.seq + 2  # right after the fork's conversation_created

        seen.clear()
        second = await runtime.dispatch("loop", "acme", "hello there", session="what-if")
        settlement = await runtime.wait(second.submission_id)
    assert second.conversation_id == fork.id
    assert settlement == {"status": "succeeded", "result": "echo: hello there"}
    [request] = seen
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "user"]
    [result] = request.messages[2].parts
    assert isinstance(result, ToolResultPart)
    outcome = repair.payload.to_json_object()
    assert result.call_id == call_id and result.is_error and result.content == outcome["content"]
    assert "forked" in result.content  # the model is told why the call has no result
    assert outcome["status"] == "unknown" and outcome["callId"] == call_id
    assert await store.verify(fork.id) == len(await store.read(fork.id))
    child = await Journal.open(store, fork.id, fence=0)
    assert await child.replay(LoopHarness()) == ["echo: hello there"]  # offline, as it ran
    assert len(await store.read(first.conversation_id)) == len(records)  # the parent untouched


async def test_a_clean_fork_writes_nothing(make_runtime: Make, store: Store) -> None:
    definition = agent(LoopHarness(), ScriptedModel(planner), RecordingTools())
    async with make_runtime({"loop": definition}) as runtime:
        first = await runtime.dispatch("loop", "acme", "charge the card")
        await runtime.wait(first.submission_id)
        records = await runtime.records(first.conversation_id)
        outcome = next(r for r in records if r.kind == "tool_outcome")
        for at_seq in (outcome.seq, len(records)):
            fork = await runtime.fork(first.conversation_id, at_seq=at_seq)
            assert fork.repaired == () and fork.repaired_calls == []
            assert len(await store.read(fork.id)) == at_seq + 1  # its records and the marker
