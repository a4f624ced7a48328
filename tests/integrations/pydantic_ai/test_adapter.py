"""The durable pydantic-ai adapter: live runs, replay with zero model calls, resume, approvals."""

from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai import messages as pa
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tether.engine import Runtime
from tether.integrations.pydantic_ai import PydanticAIHarness, durable
from tether.journal import Decision, Journal, ToolPolicy
from tether.records import StepRecorded
from tether.store import Store

from ...engine.test_runtime import settle
from ..approvals import decide_parked
from ..cuts import resume_from_every_cut
from .app import make_agent, script

Make = Callable[..., Runtime]


def counting(calls: list[int]) -> FunctionModel:
    def reply(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        calls.append(len(messages))
        return script(messages, info)

    return FunctionModel(reply, model_name="scripted")


def refusing(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
    raise AssertionError("a replay called the model")


async def kinds(runtime: Runtime, conversation_id: str) -> list[str]:
    return [record.kind for record in await runtime.records(conversation_id)]


async def run(runtime: Runtime, text: str, instance: str = "me") -> tuple[str, Any]:
    receipt = await runtime.dispatch("helper", instance, text)
    return receipt.conversation_id, (await settle(runtime, receipt.submission_id))["result"]


async def test_a_run_journals_every_model_and_tool_call(make_runtime: Make) -> None:
    calls: list[int] = []
    async with make_runtime({"helper": durable(make_agent(counting(calls)))}) as runtime:
        conversation_id, result = await run(runtime, "research tides")
        assert result == "done: three facts about tides"
        assert await kinds(runtime, conversation_id) == [
            "conversation_created",
            "execution_started",
            "user_message",
            "model_called",
            "assistant_message_completed",
            "tool_called",
            "tool_outcome",
            "model_called",
            "assistant_message_completed",
            "execution_ended",
            "submission_settled",
        ]
    assert len(calls) == 2


async def test_replay_of_a_multi_turn_session_makes_zero_model_calls(
    make_runtime: Make, store: Store
) -> None:
    async with make_runtime({"helper": durable(make_agent())}) as runtime:
        conversation_id, first = await run(runtime, "research tides")
        _, second = await run(runtime, "thanks")
        _, third = await run(runtime, "fail once")
    assert second == "you said: thanks"
    assert third == 'done: {"attempts":2}'
    journal = await Journal.open(store, conversation_id, fence=0)
    harness = PydanticAIHarness(make_agent(FunctionModel(refusing, model_name="scripted")))
    assert await journal.replay(harness) == [first, second, third]


async def test_resume_from_every_cut_never_repeats_a_recorded_model_call(
    make_runtime: Make, store: Store
) -> None:
    helper = durable(make_agent(), idempotent_tools=["research"])
    async with make_runtime({"helper": helper}) as runtime:
        conversation_id, expected = await run(runtime, "research tides")

    def live() -> tuple[PydanticAIHarness, list[int]]:
        calls: list[int] = []
        agent = make_agent(counting(calls))
        return PydanticAIHarness(agent, idempotent_tools=["research"]), calls

    await resume_from_every_cut(
        store,
        conversation_id,
        expected,
        live=live,
        replayer=lambda: PydanticAIHarness(
            make_agent(FunctionModel(refusing, model_name="scripted"))
        ),
    )


@pytest.mark.parametrize(
    ("decision", "args", "expected"),
    [
        ("approve", None, "done: sent to bob@example.com: lunch?"),
        (
            "edit",
            {"to": "carol@example.com", "text": "tea?"},
            "done: sent to carol@example.com: tea?",
        ),
        ("reject", None, "done: Tool execution was denied by ann: no."),
    ],
)
async def test_requires_approval_tools_park_for_a_tether_decision(
    make_runtime: Make, store: Store, decision: Decision, args: Any, expected: str
) -> None:
    async with make_runtime({"helper": durable(make_agent())}) as runtime:
        receipt = await runtime.dispatch("helper", "me", "email lunch?")
        gated, result = await decide_parked(runtime, store, receipt, decision, args)
    assert gated == {"to": "bob@example.com", "text": "lunch?"}
    assert result == expected
    replayed = await (await Journal.open(store, receipt.conversation_id, fence=0)).replay(
        PydanticAIHarness(make_agent(FunctionModel(refusing, model_name="scripted")))
    )
    assert replayed == [expected]


async def test_a_fork_continues_from_any_seq(make_runtime: Make) -> None:
    async with make_runtime({"helper": durable(make_agent())}) as runtime:
        conversation_id, _ = await run(runtime, "research tides")
        settled = max(r.seq for r in await runtime.records(conversation_id))
        fork = await runtime.fork(conversation_id, at_seq=settled, session="alt")
        receipt = await runtime.dispatch("helper", "me", "research moons", session="alt")
        assert (await settle(runtime, receipt.submission_id))["result"] == (
            "done: three facts about moons"
        )
        assert receipt.conversation_id == fork.id


async def test_a_tool_policy_retries_a_tool_that_raised_and_journals_the_failure(
    make_runtime: Make,
) -> None:
    def reply(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        returned = [p for p in messages[-1].parts if isinstance(p, pa.ToolReturnPart)]
        if returned:
            return pa.ModelResponse(parts=[pa.TextPart(f"got {returned[0].content}")])
        return pa.ModelResponse(parts=[pa.ToolCallPart("fetch", {}, tool_call_id="c1")])

    agent = Agent(FunctionModel(reply, model_name="scripted"), name="fetcher")
    attempts: list[int] = []

    @agent.tool_plain
    async def fetch() -> str:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            raise ConnectionError("reset by peer")
        return "the page"

    helper = durable(agent, tool_policies={"fetch": ToolPolicy(retries=2, backoff=0)})
    async with make_runtime({"helper": helper}) as runtime:
        conversation_id, result = await run(runtime, "go")
        records = await runtime.records(conversation_id)
    assert result == "got the page" and attempts == [1, 2]
    failed = [r.payload for r in records if isinstance(r.payload, StepRecorded)]
    assert [(step.name, step.value["attempt"]) for step in failed] == [  # type: ignore[call-overload,index]
        ("tether.attempt_failed", 1)
    ]
