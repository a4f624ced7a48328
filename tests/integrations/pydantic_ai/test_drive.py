"""A durable pydantic-ai agent stays durable however its harness drives it (issue 25 gap 5):
``run``, ``iter`` (node by node, and streaming each node), ``run_stream`` and
``run_stream_events``. Each is journaled alike, resumes from every cut without asking the
model again for a recorded answer, and replays with zero requests, also over HTTP against
the fake OpenAI API through the real ``openai`` SDK."""

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import JsonValue
from pydantic_ai import Agent
from pydantic_ai.models import infer_model
from pydantic_ai.models.function import FunctionModel

from tether.engine import Runtime
from tether.integrations import durable_definition, turn_scope
from tether.integrations.pydantic_ai import PydanticAIHarness, durable, journaled_agent
from tether.journal import Journal, Turn
from tether.store import MemoryStore, Store
from tether.testing import copy_prefix

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, Call, FakeOpenAI
from ..cuts import resume_from_every_cut
from .app import DRIVES, make_agent
from .test_adapter import counting, refusing

Make = Callable[..., Runtime]
JOURNALED = [
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


@pytest.fixture(params=sorted(DRIVES))
def drive(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_every_drive_journals_each_model_and_tool_call(
    make_runtime: Make, drive: str
) -> None:
    calls: list[int] = []
    helper = durable(make_agent(counting(calls)), drive=DRIVES[drive])
    async with make_runtime({"helper": helper}) as runtime:
        receipt = await runtime.dispatch("helper", "me", "look up tides")
        settled = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert settled["result"] == "done: three facts about tides"
    assert [r.kind for r in records] == JOURNALED
    assert len(calls) == 2


async def test_every_drive_resumes_from_every_cut_and_replays_with_no_model(
    make_runtime: Make, store: Store, drive: str
) -> None:
    helper = durable(make_agent(), idempotent_tools=["research"], drive=DRIVES[drive])
    async with make_runtime({"helper": helper}) as runtime:
        receipt = await runtime.dispatch("helper", "me", "look up tides")
        expected = (await settle(runtime, receipt.submission_id))["result"]

    def live() -> tuple[PydanticAIHarness, list[int]]:
        calls: list[int] = []
        agent = make_agent(counting(calls))
        harness = PydanticAIHarness(agent, idempotent_tools=["research"], drive=DRIVES[drive])
        return harness, calls

    await resume_from_every_cut(
        store,
        receipt.conversation_id,
        expected,
        live=live,
        replayer=lambda: PydanticAIHarness(
            make_agent(FunctionModel(refusing, model_name="scripted")), drive=DRIVES[drive]
        ),
    )


def http_agent() -> Agent[None, str]:
    return make_agent(infer_model("openai-chat:gpt-4.1-mini"))


async def test_over_http_a_crash_mid_tool_repeats_no_request_and_replay_sends_none(
    make_runtime: Make, store: Store, fake: FakeOpenAI, drive: str
) -> None:
    research = Answer(calls=(Call("research", {"topic": "tides"}),))
    fake.add(research, Answer(text="Tides turn twice a day."))
    helper = durable(http_agent(), idempotent_tools=["research"], drive=DRIVES[drive])
    async with make_runtime({"helper": helper}) as runtime:
        receipt = await runtime.dispatch("helper", "me", "look up tides")
        assert (await settle(runtime, receipt.submission_id))["result"] == (
            "Tides turn twice a day."
        )
    assert fake.count == 2
    assert fake.requests[0].stream  # the model streamed into the log, whatever the drive

    replayer = PydanticAIHarness(http_agent(), drive=DRIVES[drive])
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(replayer) == ["Tides turn twice a day."]
    assert fake.count == 2  # a replay sends nothing

    # Killed mid-tool: the first answer is recorded, only the second is asked again.
    records = await store.read(receipt.conversation_id)
    mid_tool = next(r.seq for r in records if r.kind == "tool_called")
    crashed = MemoryStore()
    await copy_prefix(store, receipt.conversation_id, mid_tool, crashed)
    fake.add(Answer(text="Tides turn twice a day."))
    harness = PydanticAIHarness(http_agent(), idempotent_tools=["research"], drive=DRIVES[drive])
    outcome = await (await Journal.open(crashed, receipt.conversation_id)).resume(harness)
    assert outcome.output == "Tides turn twice a day."
    assert fake.count == 3
    assert fake.requests[2].conversation == fake.requests[1].conversation


async def test_a_drive_that_runs_the_agent_itself_is_journaled_just_the_same(
    make_runtime: Make, store: Store
) -> None:
    calls: list[int] = []
    agent = make_agent(counting(calls))

    async def itself(journaled: Any, prompt: str, history: Any) -> Any:
        return (await agent.run(prompt, message_history=history)).output  # not the one handed

    async with make_runtime({"helper": durable(agent, drive=itself)}) as runtime:
        receipt = await runtime.dispatch("helper", "me", "look up tides")
        settled = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert settled["result"] == "done: three facts about tides"
    assert [r.kind for r in records] == JOURNALED and len(calls) == 2
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    replayer = make_agent(FunctionModel(refusing, model_name="scripted"))

    async def replayed(journaled: Any, prompt: str, history: Any) -> Any:
        return (await replayer.run(prompt, message_history=history)).output

    assert await journal.replay(PydanticAIHarness(replayer, drive=replayed)) == [settled["result"]]


class OwnHarness:
    """A harness of the user's own, driving a journaled agent node by node."""

    name, version = "own", "1"

    def __init__(self, agent: Agent[None, str]) -> None:
        self.agent = agent

    async def run(self, turn: Turn) -> JsonValue:
        with turn_scope(turn):
            agent = journaled_agent(self.agent, idempotent_tools=["research"])
            async with agent.iter(turn.inputs[-1].text) as run:
                async for _ in run:
                    pass
        if turn.failure is not None:
            raise turn.failure
        assert run.result is not None
        output: str = run.result.output
        return output


async def test_a_harness_of_its_own_journals_a_journaled_agent(
    make_runtime: Make, store: Store
) -> None:
    calls: list[int] = []
    own = durable_definition(OwnHarness(make_agent(counting(calls))))
    async with make_runtime({"helper": own}) as runtime:
        receipt = await runtime.dispatch("helper", "me", "look up tides")
        settled = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    assert settled["result"] == "done: three facts about tides"
    assert [r.kind for r in records] == JOURNALED and len(calls) == 2
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    replayer = OwnHarness(make_agent(FunctionModel(refusing, model_name="scripted")))
    assert await journal.replay(replayer) == [settled["result"]]
