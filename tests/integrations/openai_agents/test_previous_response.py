"""``previous_response_id`` chains through the journal (issue 42 item 4): a durable run's
responses keep the provider's ids, the SDK chains on them, and the journaled model puts
back what a chained call continues, from the log, so the provider is never asked to hold a
response. The fake OpenAI API holds none (it refuses any ``previous_response_id``), which is
the provider after it dropped them: a run, its resume from every cut and its replay work."""

from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool

from tether.engine import Runtime
from tether.integrations import durable_definition, turn_scope
from tether.integrations.openai_agents import journaled_agent
from tether.journal import Turn
from tether.store import Store

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from .. import cuts
from .over_http import MODEL

Make = Callable[..., Runtime]
QUIET = RunConfig(tracing_disabled=True)


@function_tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def helper() -> Agent[Any]:
    return Agent(name="helper", instructions="Help.", model=MODEL, tools=[lookup])


class AutoChained:
    """Runs the journaled clone with the SDK chaining each call on the previous response."""

    name, version = "agent", "1"

    async def run(self, turn: Turn) -> Any:
        with turn_scope(turn):
            result = await Runner.run(
                journaled_agent(helper()),
                turn.inputs[-1].text,
                auto_previous_response_id=True,
                run_config=QUIET,
            )
        return result.final_output


class AutoChainedStreamed:
    """As :class:`AutoChained`, with ``Runner.run_streamed`` (the SDK takes the response id
    from the stream's ``response.completed``)."""

    name, version = "agent", "1"

    async def run(self, turn: Turn) -> Any:
        with turn_scope(turn):
            result = Runner.run_streamed(
                journaled_agent(helper()),
                turn.inputs[-1].text,
                auto_previous_response_id=True,
                run_config=QUIET,
            )
            async for _ in result.stream_events():
                pass
        return result.final_output


class TwoRuns:
    """Two runs of one clone, the second continuing the first by its last response's id."""

    name, version = "agent", "1"

    async def run(self, turn: Turn) -> Any:
        clone = journaled_agent(helper())
        with turn_scope(turn):
            first = await Runner.run(clone, "look up tides", run_config=QUIET)
            second = await Runner.run(
                clone,
                "and now in one word?",
                previous_response_id=first.last_response_id,
                run_config=QUIET,
            )
        return [first.final_output, second.final_output]


def kinds(request_input: list[dict[str, Any]]) -> list[str]:
    return [str(item["role"] if "role" in item else item.get("type")) for item in request_input]


AUTO = (Answer(calls=(Call("lookup", {"topic": "tides"}),)), Answer(text="Tides rise."))
TWO = (*AUTO, Answer(text="Moon."))


@pytest.mark.parametrize(
    ("harness", "answers", "expected", "last_input"),
    [
        (
            AutoChained,
            AUTO,
            "Tides rise.",
            ["user", "function_call", "function_call_output"],
        ),
        (
            AutoChainedStreamed,
            AUTO,
            "Tides rise.",
            ["user", "function_call", "function_call_output"],
        ),
        (
            TwoRuns,
            TWO,
            ["Tides rise.", "Moon."],
            ["user", "function_call", "function_call_output", "assistant", "user"],
        ),
    ],
    ids=["auto_previous_response_id", "streamed", "previous_response_id"],
)
async def test_a_chained_run_sends_its_history_from_the_journal(
    harness: Callable[[], Any],
    answers: tuple[Answer, ...],
    expected: Any,
    last_input: list[str],
    fake: FakeOpenAI,
    make_runtime: Make,
    store: Store,
) -> None:
    fake.add(*answers)
    async with make_runtime({"agent": durable_definition(harness())}) as runtime:
        receipt = await runtime.dispatch("agent", "me", "look up tides")
        settled = await settle(runtime, receipt.submission_id)
    assert settled == {"status": "succeeded", "result": expected}, fake.refused
    assert fake.refused == [] and fake.count == len(answers)
    assert all("previous_response_id" not in r.body for r in fake.requests)
    assert kinds(fake.requests[-1].body["input"]) == last_input
    assert await cuts.replay_sends_nothing(store, fake, receipt.conversation_id, harness()) == [
        expected
    ]
    await cuts.resume_over_http_from_every_cut(
        store, fake, receipt.conversation_id, expected, answers, harness
    )
