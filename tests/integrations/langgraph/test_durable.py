"""A LangGraph ReAct graph as a durable Tether agent: live, replay, resume, fork, approval."""

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import JsonValue

from tether import SessionKey
from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.integrations.langgraph import (
    CompiledGraph,
    JournaledChatModel,
    LangGraphHarness,
    durable,
)
from tether.journal import Journal, ToolPolicy
from tether.records import Record, StepRecorded, UserMessage
from tether.store import MemoryStore, Store
from tether.testing import copy_prefix

from ...engine.waits import until_appended
from .app import TOOL_RUNS, ExplodingChatModel, ScriptedChatModel, build, lookup, react

Make = Callable[..., Runtime]


async def settle(runtime: Runtime, submission_id: str) -> dict[str, JsonValue]:
    async with asyncio.timeout(60):
        return await runtime.wait(submission_id)


async def wait_for(runtime: Runtime, conversation_id: str, kind: str) -> list[Record]:
    async def found() -> list[Record]:
        return [r for r in await runtime.records(conversation_id) if r.kind == kind]

    return await until_appended(runtime.store, conversation_id, found)


def agent_spec(definition: AgentDefinition) -> AgentSpec:
    spec = definition.initialize("acme", {})
    assert isinstance(spec, AgentSpec)
    return spec


def replayer() -> LangGraphHarness:
    return LangGraphHarness(build, model=ExplodingChatModel(), tools=[lookup], name="react")


async def test_live_run_journals_model_and_tool_calls(make_runtime: Make, store: Store) -> None:
    model = ScriptedChatModel(calls=[])
    async with make_runtime({"react": react(model)}) as runtime:
        receipt = await runtime.dispatch("react", "acme", "tides")
        outcome = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
        usage = await runtime.usage(receipt.conversation_id)
    assert outcome == {"status": "succeeded", "result": "answer: facts about tides"}
    assert model.calls == ["1:lookup", "1:answer"]
    kinds = [r.kind for r in records]
    assert kinds.count("model_called") == 2 and kinds.count("assistant_message_completed") == 2
    assert kinds.count("tool_called") == 1 and kinds.count("tool_outcome") == 1
    assert kinds.index("tool_called") < kinds.index("tool_outcome")
    [called] = [r.payload for r in records if r.kind == "tool_called"]
    assert called.to_json_object()["callId"] == "call-1"
    assert usage.input_tokens == 20 and usage.output_tokens == 10


async def test_replay_makes_zero_model_calls(make_runtime: Make, store: Store) -> None:
    model = ScriptedChatModel(calls=[])
    async with make_runtime({"react": react(model)}) as runtime:
        results = []
        for question in ("tides", "moons"):
            receipt = await runtime.dispatch("react", "acme", question)
            results.append((await settle(runtime, receipt.submission_id))["result"])
    assert results == ["answer: facts about tides", "answer: facts about moons"]
    assert model.calls == ["1:lookup", "1:answer", "2:lookup", "2:answer"]
    runs = len(TOOL_RUNS)
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(replayer()) == results
    assert len(TOOL_RUNS) == runs  # no tool ran either


async def test_resume_after_a_cut_mid_tool_repeats_no_model_call(store: Store) -> None:
    key = SessionKey("react", "acme")
    conversation, _ = await store.ensure_conversation(
        key, conversation_id="conv-lg", created_at=datetime.now(UTC)
    )
    model = ScriptedChatModel(calls=[])
    spec = agent_spec(react(model, idempotent_tools={"lookup"}))
    journal = await Journal.open(store, conversation.id, model=spec.model, tools=spec.tools)
    first = await journal.exec(spec.harness, [UserMessage(body="tides")])
    assert first.output == "answer: facts about tides"
    records = await store.read(conversation.id)
    cut = next(r.seq for r in records if r.kind == "tool_called")
    crashed = MemoryStore()
    await copy_prefix(store, conversation.id, cut, crashed)
    again = ScriptedChatModel(calls=[])
    spec = agent_spec(react(again, idempotent_tools={"lookup"}))
    resumed = await (
        await Journal.open(crashed, conversation.id, model=spec.model, tools=spec.tools)
    ).resume(spec.harness)
    assert resumed.output == "answer: facts about tides"
    assert again.calls == ["1:answer"]  # the recorded first call was served from the log
    kinds = [r.kind for r in await crashed.read(conversation.id)]
    assert kinds.count("tool_called") == 1 and kinds.count("tool_outcome") == 1


async def test_a_fork_continues_from_its_cut(make_runtime: Make, store: Store) -> None:
    model = ScriptedChatModel(calls=[])
    async with make_runtime({"react": react(model)}) as runtime:
        for question in ("tides", "moons"):
            receipt = await runtime.dispatch("react", "acme", question)
            await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
        cut = next(r.seq for r in records if r.kind == "submission_settled")
        child = await runtime.fork(receipt.conversation_id, at_seq=cut, session="what-if")
        model.calls.clear()
        forked = await runtime.dispatch("react", "acme", "comets", session="what-if")
        outcome = await settle(runtime, forked.submission_id)
        assert forked.conversation_id == child.id
    assert outcome["result"] == "answer: facts about comets"
    # The fork saw the first exchange only: the second user message is its "call-2".
    assert model.calls == ["2:lookup", "2:answer"]
    journal = await Journal.open(store, child.id, fence=0)
    assert await journal.replay(replayer()) == ["answer: facts about tides", outcome["result"]]


async def test_an_approval_tool_parks_until_decided(make_runtime: Make) -> None:
    model = ScriptedChatModel(calls=[])
    async with make_runtime({"react": react(model, approval_tools={"lookup"})}) as runtime:
        receipt = await runtime.dispatch("react", "acme", "tides")
        [request] = await wait_for(runtime, receipt.conversation_id, "approval_requested")
        approval_id = str(request.payload.to_json_object()["approvalId"])
        assert request.payload.to_json_object()["parameters"]["type"] == "object"
        await runtime.approve(approval_id, "reject", approver="ops", reason="not now")
        outcome = await settle(runtime, receipt.submission_id)
    assert str(outcome["result"]).startswith("answer: Tool execution was denied by ops")
    assert model.calls == ["1:lookup", "1:answer"]


def test_unknown_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="no such tools"):
        react(idempotent_tools={"nope"})


async def test_parallel_tool_calls_replay_in_their_recorded_order(
    make_runtime: Make, store: Store
) -> None:
    model = ScriptedChatModel(calls=[], fan_out=4)
    async with make_runtime({"react": react(model)}) as runtime:
        receipt = await runtime.dispatch("react", "acme", "tides")
        outcome = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert outcome["result"] == "answer: " + "; ".join(f"facts about tides #{i}" for i in range(4))
    assert [r.kind for r in records].count("tool_outcome") == 4
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(replayer()) == [outcome["result"]]


@tool("lookup")
async def broken_lookup(topic: str) -> str:
    """Look a topic up (the service is down)."""
    raise ValueError("service down")


async def test_a_failing_tool_is_an_error_outcome_the_model_sees(make_runtime: Make) -> None:
    model = ScriptedChatModel(calls=[])
    agent = durable(build, model=model, tools=[broken_lookup], name="react")
    async with make_runtime({"react": agent}) as runtime:
        receipt = await runtime.dispatch("react", "acme", "tides")
        outcome = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert outcome["result"] == "answer: ValueError: service down"
    [result] = [r.payload.to_json_object() for r in records if r.kind == "tool_outcome"]
    assert result["isError"] is True


def answer_only(model: JournaledChatModel, tools: list[BaseTool]) -> CompiledGraph:
    async def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile()


async def test_a_streaming_model_streams_into_the_log_and_replays(
    make_runtime: Make, store: Store
) -> None:
    streaming = GenericFakeChatModel(messages=iter([AIMessage(content="hello brave new world")]))
    agent = durable(answer_only, model=streaming, name="plain")
    async with make_runtime({"plain": agent}) as runtime:
        receipt = await runtime.dispatch("plain", "acme", "hi")
        outcome = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert outcome["result"] == "hello brave new world"
    deltas = [
        r.payload.to_json_object()["text"] for r in records if r.kind == "assistant_text_delta"
    ]
    assert "".join(str(d) for d in deltas) == "hello brave new world"
    # The model's name is part of each call's hash: the replay names the same one, with
    # nothing left to answer.
    spent = GenericFakeChatModel(messages=iter([]))
    harness = LangGraphHarness(answer_only, model=spent, name="plain")
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(harness) == ["hello brave new world"]


async def test_a_tool_policy_retries_a_tool_that_raised(make_runtime: Make) -> None:
    attempts: list[str] = []

    @tool("lookup")
    async def flaky_lookup(topic: str) -> str:
        """Look a topic up, failing the first time."""
        attempts.append(topic)
        if len(attempts) == 1:
            raise ConnectionError("reset by peer")
        return f"facts about {topic}"

    definition = durable(
        build,
        model=ScriptedChatModel(calls=[]),
        tools=[flaky_lookup],
        name="react",
        tool_policies={"lookup": ToolPolicy(retries=1, backoff=0)},
    )
    async with make_runtime({"react": definition}) as runtime:
        receipt = await runtime.dispatch("react", "acme", "tides")
        outcome = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert outcome == {"status": "succeeded", "result": "answer: facts about tides"}
    assert attempts == ["tides", "tides"]
    failed = [
        r.payload.value
        for r in records
        if isinstance(r.payload, StepRecorded) and r.payload.name == "tether.attempt_failed"
    ]
    assert failed == [
        {"attempt": 1, "error": "ConnectionError: reset by peer", "retryAt": failed[0]["retryAt"]}  # type: ignore[call-overload,index]
    ]


def test_a_tool_policy_must_name_a_tool_of_the_graph() -> None:
    with pytest.raises(ValueError, match="no such tools: serach"):
        durable(
            build,
            model=ScriptedChatModel(calls=[]),
            tools=[lookup],
            name="react",
            tool_policies={"serach": ToolPolicy(retries=1), "*": ToolPolicy(timeout=5)},
        )
