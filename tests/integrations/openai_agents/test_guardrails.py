"""Guardrails whose checker agent calls the model (the SDK's usual pattern) are journaled.

Each construct runs durably over the fake OpenAI API: every model request the run sent is a
``model_called`` record, a replay sends none, and a resume from every cut of the log sends
only the requests the cut lost.
"""

from collections.abc import Callable
from typing import Any

import pytest
from agents import (
    Agent,
    AgentHooks,
    GuardrailFunctionOutput,
    RunConfig,
    RunContextWrapper,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    function_tool,
    input_guardrail,
    output_guardrail,
    tool_input_guardrail,
)
from agents.tracing import get_current_trace
from agents.tracing.traces import NoOpTrace
from pydantic import JsonValue

from tether.engine import Runtime
from tether.integrations import durable_definition, turn_scope
from tether.integrations.openai_agents import journaled_agent
from tether.journal import Journal, Turn
from tether.store import Store

from ...fakes.openai_server import Answer, Call, FakeOpenAI
from .over_http import (
    MODEL,
    replay_sends_nothing,
    resume_from_every_cut,
    run_durably,
)

Make = Callable[..., Runtime]


class TraceSeen(AgentHooks[Any]):
    """Records the SDK trace a (checker) agent runs under."""

    def __init__(self) -> None:
        self.traces: list[object] = []

    async def on_start(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        self.traces.append(get_current_trace())


def checker(hooks: TraceSeen | None = None) -> Agent[Any]:
    return Agent(name="checker", instructions="Answer yes or no.", model=MODEL, hooks=hooks)


def verdict(output: object) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info=output, tripwire_triggered="yes" in str(output))


def with_input_guardrail(hooks: TraceSeen | None = None) -> Agent[Any]:
    @input_guardrail
    async def homework(ctx: RunContextWrapper[Any], agent: Agent[Any], input: Any) -> Any:
        result = await Runner.run(checker(hooks), input, context=ctx.context)
        return verdict(result.final_output)

    return Agent(name="helper", instructions="Help.", model=MODEL, input_guardrails=[homework])


def with_output_guardrail() -> Agent[Any]:
    @output_guardrail
    async def leaks(ctx: RunContextWrapper[Any], agent: Agent[Any], output: Any) -> Any:
        result = await Runner.run(checker(), f"Does this leak a secret? {output}")
        return verdict(result.final_output)

    return Agent(name="helper", instructions="Help.", model=MODEL, output_guardrails=[leaks])


def with_two_input_guardrails() -> Agent[Any]:
    def guard(name: str) -> Any:
        async def check(ctx: RunContextWrapper[Any], agent: Agent[Any], input: Any) -> Any:
            result = await Runner.run(checker(), f"{name}: {input}")
            return verdict(result.final_output)

        check.__name__ = name
        return input_guardrail(check)

    guards = [guard("first"), guard("second")]
    return Agent(name="helper", instructions="Help.", model=MODEL, input_guardrails=guards)


def with_tool_guardrail() -> Agent[Any]:
    @tool_input_guardrail
    async def safe(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        result = await Runner.run(checker(), f"Is {data.context.tool_arguments} unsafe?")
        if "yes" in str(result.final_output):
            return ToolGuardrailFunctionOutput.reject_content("refused by the checker")
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[safe])
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"facts about {topic}"

    return Agent(name="helper", instructions="Help.", model=MODEL, tools=[lookup])


CONSTRUCTS: dict[str, tuple[Callable[[], Agent[Any]], list[Answer], str]] = {
    # the agent, the answers the fake gives in order, the run's result
    "input guardrail": (with_input_guardrail, [Answer(text="no"), Answer(text="Hi!")], "Hi!"),
    "output guardrail": (with_output_guardrail, [Answer(text="Hi!"), Answer(text="no")], "Hi!"),
    "two input guardrails": (
        with_two_input_guardrails,
        [Answer(text="no"), Answer(text="no, fine"), Answer(text="Hi!")],
        "Hi!",
    ),
    "tool input guardrail": (
        with_tool_guardrail,
        [
            Answer(calls=(Call("lookup", {"topic": "tides"}),)),
            Answer(text="no"),
            Answer(text="Tides turn."),
        ],
        "Tides turn.",
    ),
}


@pytest.mark.parametrize("construct", sorted(CONSTRUCTS))
async def test_a_checker_agents_model_calls_are_journaled(
    construct: str,
    fake: FakeOpenAI,
    make_runtime: Make,
    store: Store,
) -> None:
    make_agent, answers, expected = CONSTRUCTS[construct]
    fake.add(*answers)
    run = await run_durably(make_runtime, make_agent, "hello")
    assert run.settled == {"status": "succeeded", "result": expected}
    assert fake.count == len(answers)
    assert run.count("model_called") == run.count("assistant_message_completed") == len(answers)
    assert await replay_sends_nothing(store, fake, run.conversation_id, make_agent) == [expected]
    await resume_from_every_cut(store, fake, run.conversation_id, expected, answers, make_agent)


async def test_guardrails_take_turns_in_their_lists_order(
    fake: FakeOpenAI, make_runtime: Make
) -> None:
    fake.add(Answer(text="no"), Answer(text="no, fine"), Answer(text="Hi!"))
    await run_durably(make_runtime, with_two_input_guardrails, "hello")
    sent = [str(r.body["input"]) for r in fake.requests]
    assert "first: " in sent[0] and "second: " in sent[1]
    assert "first" not in sent[2] and "second" not in sent[2]  # the agent's own, after both


async def test_a_tripped_guardrail_fails_the_run_and_replays_without_requests(
    fake: FakeOpenAI, make_runtime: Make, store: Store
) -> None:
    fake.add(Answer(text="yes, homework"))
    run = await run_durably(make_runtime, with_input_guardrail, "solve my homework")
    assert run.settled["status"] == "failed"
    assert "InputGuardrailTripwireTriggered" in str(run.settled)
    assert fake.count == 1  # the checker only: input guardrails run before the model call
    assert run.count("model_called") == 1
    assert "execution_failed" in run.kinds()
    assert await replay_sends_nothing(store, fake, run.conversation_id, with_input_guardrail) == []


async def test_a_checker_agents_run_reports_to_no_sdk_trace(
    fake: FakeOpenAI, make_runtime: Make
) -> None:
    hooks = TraceSeen()
    fake.add(Answer(text="no"), Answer(text="Hi!"))
    run = await run_durably(make_runtime, lambda: with_input_guardrail(hooks), "hello")
    assert run.result == "Hi!"
    assert len(hooks.traces) == 1
    assert hooks.traces[0] is None or isinstance(hooks.traces[0], NoOpTrace)


async def test_outside_a_durable_run_the_sdks_runner_is_unchanged(fake: FakeOpenAI) -> None:
    fake.add(Answer(text="plain"))
    result = await Runner.run(checker(), "hi", run_config={"tracing_disabled": True})
    assert result.final_output == "plain" and fake.count == 1


class StreamedHarness:
    """A harness of one's own that streams the journaled agent (``Runner.run_streamed``)."""

    name, version = "agent", "1"

    async def run(self, turn: Turn) -> JsonValue:
        agent = journaled_agent(with_input_guardrail())
        with turn_scope(turn):
            result = Runner.run_streamed(
                agent, turn.inputs[-1].text, run_config=RunConfig(tracing_disabled=True)
            )
            async for _ in result.stream_events():
                pass
        return str(result.final_output)


async def test_a_streamed_run_journals_its_guardrails_checker_too(
    fake: FakeOpenAI, make_runtime: Make, store: Store
) -> None:
    fake.add(Answer(text="no"), Answer(text="Hi!"))
    async with make_runtime({"agent": durable_definition(StreamedHarness())}) as runtime:
        receipt = await runtime.dispatch("agent", "me", "hello")
        assert await runtime.wait(receipt.submission_id) == {"status": "succeeded", "result": "Hi!"}
        records = await runtime.records(receipt.conversation_id)
    assert fake.count == 2 and sum(r.kind == "model_called" for r in records) == 2
    assert "Answer yes or no." in str(fake.requests[0].body)  # the checker first
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(StreamedHarness()) == ["Hi!"] and fake.count == 2
