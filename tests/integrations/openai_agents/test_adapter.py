"""The durable Agents SDK adapter: live runs, replay with zero model calls, resume, approvals."""

from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner
from agents.items import TResponseOutputItem
from pydantic import JsonValue

from tether.engine import Runtime
from tether.integrations import durable_definition, turn_scope
from tether.integrations.openai_agents import (
    OpenAIAgentsHarness,
    OpenAIAgentsTurn,
    durable,
    journaled_agent,
)
from tether.journal import Decision, Journal, ToolPolicy, Turn
from tether.records import StepRecorded, ToolOutcome
from tether.store import Store

from ...engine.test_runtime import settle
from ..approvals import decide_parked
from ..cuts import resume_from_every_cut
from .app import make_agent, script
from .scripted import ForbiddenModel, ScriptedModel, call

Make = Callable[..., Runtime]


async def kinds(runtime: Runtime, conversation_id: str) -> list[str]:
    return [record.kind for record in await runtime.records(conversation_id)]


async def run(runtime: Runtime, text: str, instance: str = "me") -> tuple[str, Any]:
    receipt = await runtime.dispatch("helper", instance, text)
    return receipt.conversation_id, (await settle(runtime, receipt.submission_id))["result"]


def replayer() -> OpenAIAgentsHarness:
    return OpenAIAgentsHarness(make_agent(ForbiddenModel()))


async def test_a_run_journals_every_model_and_tool_call(make_runtime: Make) -> None:
    model = ScriptedModel(script)
    async with make_runtime({"helper": durable(make_agent(model))}) as runtime:
        conversation_id, result = await run(runtime, "weather Paris")
        assert result == "done: sunny in Paris"
        assert [k for k in await kinds(runtime, conversation_id) if "delta" not in k] == [
            "conversation_created",
            "execution_started",
            "user_message",
            "model_called",
            "assistant_message_started",
            "assistant_message_completed",
            "tool_called",
            "tool_outcome",
            "model_called",
            "assistant_message_started",
            "assistant_message_completed",
            "execution_ended",
            "submission_settled",
        ]
        records = await runtime.records(conversation_id)
    assert len(model.calls) == 2
    completed = [r.payload for r in records if r.kind == "assistant_message_completed"]
    first = completed[0].message  # type: ignore[attr-defined]
    assert first.text == "on it"
    assert [(c.call_id, c.name, c.args) for c in first.tool_calls] == [
        ("call_1_0", "get_weather", {"city": "Paris"})
    ]
    usage = completed[0].usage  # type: ignore[attr-defined]
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (10, 5, 2)


async def test_the_users_agent_is_not_mutated() -> None:
    agent = make_agent()
    tools = list(agent.tools)
    clone = journaled_agent(agent)
    assert clone is not agent and agent.tools == tools and agent.model is not clone.model
    approvals = [t.needs_approval for t in agent.tools if isinstance(t, FunctionTool)]
    assert approvals == [False, True, False]
    assert all(not t.needs_approval for t in clone.tools if isinstance(t, FunctionTool))


async def test_a_failing_tool_is_journaled_as_an_error(make_runtime: Make) -> None:
    async with make_runtime({"helper": durable(make_agent())}) as runtime:
        conversation_id, result = await run(runtime, "break it")
        records = await runtime.records(conversation_id)
    outcome = next(r.payload for r in records if r.kind == "tool_outcome")
    assert outcome.is_error is True  # type: ignore[attr-defined]
    assert result == f"done: {outcome.content}"  # type: ignore[attr-defined]


async def test_replay_of_a_multi_turn_session_makes_zero_model_calls(
    make_runtime: Make, store: Store
) -> None:
    async with make_runtime({"helper": durable(make_agent())}) as runtime:
        conversation_id, first = await run(runtime, "weather Oslo")
        _, second = await run(runtime, "thanks")
        _, third = await run(runtime, "break")
    assert (first, second) == ("done: sunny in Oslo", "you said: thanks")
    journal = await Journal.open(store, conversation_id, fence=0)
    assert await journal.replay(replayer()) == [first, second, third]


async def test_resume_from_every_cut_never_repeats_a_recorded_model_call(
    make_runtime: Make, store: Store
) -> None:
    definition = durable(make_agent(), idempotent_tools=["get_weather"])
    async with make_runtime({"helper": definition}) as runtime:
        conversation_id, expected = await run(runtime, "weather Rome")

    def live() -> tuple[OpenAIAgentsHarness, list[Any]]:
        model = ScriptedModel(script)
        harness = OpenAIAgentsHarness(make_agent(model), idempotent_tools=["get_weather"])
        return harness, model.calls

    await resume_from_every_cut(store, conversation_id, expected, live=live, replayer=replayer)


@pytest.mark.parametrize(
    ("decision", "args", "expected"),
    [
        ("approve", None, "done: sent to bob@example.com: lunch?"),
        (
            "edit",
            {"to": "carol@example.com", "body": "tea?"},
            "done: sent to carol@example.com: tea?",
        ),
        ("reject", None, "done: Tool execution was denied by ann: no."),
    ],
)
async def test_needs_approval_tools_park_for_a_tether_decision(
    make_runtime: Make, store: Store, decision: Decision, args: Any, expected: str
) -> None:
    async with make_runtime({"helper": durable(make_agent())}) as runtime:
        receipt = await runtime.dispatch("helper", "me", "email lunch?")
        gated, result = await decide_parked(runtime, store, receipt, decision, args)
    assert gated == {"to": "bob@example.com", "body": "lunch?"}
    assert result == expected
    replayed = await (await Journal.open(store, receipt.conversation_id, fence=0)).replay(
        replayer()
    )
    assert replayed == [expected]


async def test_a_fork_continues_from_any_seq(make_runtime: Make) -> None:
    async with make_runtime({"helper": durable(make_agent())}) as runtime:
        conversation_id, _ = await run(runtime, "weather Lima")
        records = await runtime.records(conversation_id)
        outcome = next(r.seq for r in records if r.kind == "tool_outcome")
        settled = max(r.seq for r in records)
        for at_seq, session in ((settled, "alt"), (outcome, "mid")):
            fork = await runtime.fork(conversation_id, at_seq=at_seq, session=session)
            receipt = await runtime.dispatch("helper", "me", "weather Quito", session=session)
            result = await settle(runtime, receipt.submission_id)
            assert result["result"] == "done: sunny in Quito", (session, result)
            assert receipt.conversation_id == fork.id


class StreamedHarness:
    """A harness that streams the journaled agent (through the tap) instead of ``Runner.run``."""

    name, version = "helper", "1"

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model
        self.events: list[Any] = []

    async def run(self, turn: Turn) -> JsonValue:
        agent = journaled_agent(make_agent(self.model))
        with turn_scope(turn):
            result = Runner.run_streamed(
                agent, turn.inputs[-1].text, run_config=RunConfig(tracing_disabled=True)
            )
            self.events = [e async for e in OpenAIAgentsTurn(result).events]
        return str(result.final_output)


async def test_a_journaled_agent_also_runs_streamed_and_replays(
    make_runtime: Make, store: Store
) -> None:
    live = StreamedHarness(ScriptedModel(script))
    async with make_runtime({"helper": durable_definition(live)}) as runtime:
        conversation_id, result = await run(runtime, "weather Bern")
    assert result == "done: sunny in Bern"
    assert len(live.model.calls) == 2
    kinds = [type(e.content).__name__ for e in live.events if hasattr(e, "content")]
    assert kinds == ["TextContent", "ToolRequestContent", "ToolResponseContent", "TextContent"]
    replay = StreamedHarness(ForbiddenModel())
    replayed = await (await Journal.open(store, conversation_id, fence=0)).replay(replay)
    assert replayed == ["done: sunny in Bern"]


def triage(items: list[dict[str, Any]]) -> list[TResponseOutputItem]:
    return [call("transfer_to_helper", "{}", "handoff_1")]


def triage_agent(helper_model: ScriptedModel, triage_model: ScriptedModel) -> Agent[Any]:
    helper = make_agent(helper_model)
    front = Agent(name="triage", instructions="Route.", model=triage_model, handoffs=[helper])
    helper.handoffs = [front]  # a cycle: cloning must terminate and keep it
    return front


async def test_handoffs_are_journaled_too_and_replay_with_zero_calls(
    make_runtime: Make, store: Store
) -> None:
    helper, front = ScriptedModel(script), ScriptedModel(triage)
    agent = triage_agent(helper, front)
    async with make_runtime({"helper": durable(agent, name="helper")}) as runtime:
        conversation_id, result = await run(runtime, "hello")
        records = await runtime.records(conversation_id)
    assert (len(front.calls), len(helper.calls)) == (1, 1)
    assert str(result).startswith("done: ")
    assert [r.kind for r in records].count("model_called") == 2
    clone = journaled_agent(agent)
    assert clone.handoffs[0].handoffs[0] is clone  # type: ignore[union-attr]
    replay = OpenAIAgentsHarness(triage_agent(ForbiddenModel(), ForbiddenModel()), name="helper")
    replayed = await (await Journal.open(store, conversation_id, fence=0)).replay(replay)
    assert replayed == [result]


async def test_a_tool_policy_retries_a_failing_tool_and_the_last_failure_is_read(
    make_runtime: Make,
) -> None:
    policies = {"broken": ToolPolicy(retries=2, backoff=0)}
    async with make_runtime({"helper": durable(make_agent(), tool_policies=policies)}) as runtime:
        conversation_id, result = await run(runtime, "break it")
        records = await runtime.records(conversation_id)
    failed = [
        r.payload.value
        for r in records
        if isinstance(r.payload, StepRecorded) and r.payload.name == "tether.attempt_failed"
    ]
    assert [f["attempt"] for f in failed] == [1, 2]  # type: ignore[call-overload,index]
    outcome = next(r.payload for r in records if isinstance(r.payload, ToolOutcome))
    # The SDK's failure message is what the model reads, after the third attempt failed.
    assert outcome.is_error and outcome.content == "An error occurred while running the tool."
    assert failed[0]["error"] == outcome.content  # type: ignore[call-overload,index]
    assert result == f"done: {outcome.content}"
