"""Stream and usage fidelity over the fake OpenAI API with the real SDK (issue 25 gaps 9, 11).

Responses reasoning summaries reach the tap as ``reasoning_summary`` deltas in a reasoning
slot that starts ``active`` (what docs/openai-agents.md promises), every event parses with
agentex's own ``TaskMessageUpdate``; a journaled run keeps the summary and sends it back to
the model; token counts the provider did not report are ``None``, never 0.
"""

from collections.abc import Callable
from typing import Any

import pytest
from agents import (
    Agent,
    Model,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
)
from openai import AsyncOpenAI
from pydantic import JsonValue, TypeAdapter

from tether.engine import Runtime
from tether.integrations import durable_definition, turn_scope
from tether.integrations.openai_agents import OpenAIAgentsTurn, journaled_agent
from tether.journal import Journal, Turn
from tether.messages import ThinkingPart
from tether.records import AssistantMessageCompleted
from tether.store import Store
from tether.stream import (
    ReasoningContent,
    ReasoningContentDelta,
    ReasoningSummaryDelta,
    StreamEvent,
    StreamTaskMessageDelta,
    StreamTaskMessageFull,
    StreamTaskMessageStart,
    TurnUsage,
    project,
)

from ...fakes.openai_server import Answer, Call, FakeOpenAI
from .over_http import MODEL, replay_sends_nothing, run_durably

agentex_types = pytest.importorskip("agentex.types")
AGENTEX: TypeAdapter[Any] = TypeAdapter(agentex_types.TaskMessageUpdate)

Make = Callable[..., Runtime]


def no_tracing() -> RunConfig:
    """A run config of its own: one's model provider caches its client, and with it the URL
    of the test's fake."""
    return RunConfig(tracing_disabled=True)


THOUGHT = "The user asks about tides; look them up."


@function_tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"facts about {topic}"


def responses_agent() -> Agent[Any]:
    return Agent(name="agent", instructions="Help.", model=MODEL, tools=[lookup])


def chat_agent() -> Agent[Any]:
    model: Model = OpenAIChatCompletionsModel(MODEL, AsyncOpenAI())
    # The SDK asks for a usage chunk by default only from api.openai.com, not from the fake.
    settings = ModelSettings(include_usage=True)
    return Agent(
        name="agent", instructions="Help.", model=model, tools=[lookup], model_settings=settings
    )


AGENTS = {"responses": responses_agent, "chat": chat_agent}


def reasoning_of(events: list[StreamEvent]) -> tuple[list[Any], list[Any]]:
    """The reasoning slots' contents (Start or Full) and their deltas."""
    contents = [
        e.content
        for e in events
        if isinstance(e, StreamTaskMessageStart | StreamTaskMessageFull)
        and isinstance(e.content, ReasoningContent)
    ]
    deltas = [
        e.delta
        for e in events
        if isinstance(e, StreamTaskMessageDelta)
        and isinstance(e.delta, ReasoningSummaryDelta | ReasoningContentDelta)
    ]
    return contents, deltas


async def test_a_reasoning_summary_streams_as_reasoning_summary_deltas(fake: FakeOpenAI) -> None:
    fake.add(
        Answer(reasoning=THOUGHT, calls=(Call("lookup", {"topic": "tides"}),)),
        Answer(text="Tides turn."),
    )
    turn = OpenAIAgentsTurn(
        Runner.run_streamed(responses_agent(), "tides?", run_config=no_tracing())
    )
    events = [event async for event in turn.events]
    for event in events:
        AGENTEX.validate_python(event.model_dump(mode="json"))
    contents, deltas = reasoning_of(events)
    assert contents == [ReasoningContent(author="agent", summary=[], content=[], style="active")]
    assert all(isinstance(d, ReasoningSummaryDelta) and d.summary_index == 0 for d in deltas)
    assert "".join(d.summary_delta or "" for d in deltas) == THOUGHT
    assert turn.usage().num_reasoning_blocks == 1


async def test_a_journaled_reasoning_summary_is_kept_and_sent_back(
    fake: FakeOpenAI, make_runtime: Make, store: Store
) -> None:
    fake.add(
        Answer(reasoning=THOUGHT, calls=(Call("lookup", {"topic": "tides"}),)),
        Answer(text="Tides turn."),
    )
    run = await run_durably(make_runtime, responses_agent, "tides?")
    assert run.result == "Tides turn."
    first = next(r.payload for r in run.records if r.kind == "assistant_message_completed")
    assert isinstance(first, AssistantMessageCompleted)
    thinking = [p for p in first.message.parts if isinstance(p, ThinkingPart)]
    assert [(p.text, p.id, p.provider) for p in thinking] == [(THOUGHT, "rs_1", "openai")]
    resent = [i for i in fake.requests[1].body["input"] if i.get("type") == "reasoning"]
    assert [(i["id"], i["summary"]) for i in resent] == [
        ("rs_1", [{"type": "summary_text", "text": THOUGHT}])
    ]
    assert await replay_sends_nothing(store, fake, run.conversation_id, responses_agent) == [
        "Tides turn."
    ]


class StreamedHarness:
    """Streams the journaled agent through the tap (a harness of one's own)."""

    name, version = "agent", "1"

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []

    async def run(self, turn: Turn) -> JsonValue:
        agent = journaled_agent(responses_agent())
        with turn_scope(turn):
            result = Runner.run_streamed(agent, "tides?", run_config=no_tracing())
            self.events = [e async for e in OpenAIAgentsTurn(result).events]
        return str(result.final_output)


async def test_a_journaled_run_streamed_gives_its_reasoning_whole(
    fake: FakeOpenAI, make_runtime: Make, store: Store
) -> None:
    fake.add(
        Answer(reasoning=THOUGHT, calls=(Call("lookup", {"topic": "tides"}),)),
        Answer(text="Tides turn."),
    )
    live = StreamedHarness()
    async with make_runtime({"agent": durable_definition(live)}) as runtime:
        receipt = await runtime.dispatch("agent", "me", "tides?")
        assert (await runtime.wait(receipt.submission_id))["result"] == "Tides turn."
    whole = ReasoningContent(author="agent", summary=[THOUGHT], content=None, style="static")
    assert reasoning_of(live.events) == ([whole], [])
    sent = fake.count
    replay = StreamedHarness()
    journal = await Journal.open(store, receipt.conversation_id, fence=0)
    assert await journal.replay(replay) == ["Tides turn."] and fake.count == sent
    assert reasoning_of(replay.events) == ([whole], [])  # the same, served from the log


@pytest.mark.parametrize("api", sorted(AGENTS))
@pytest.mark.parametrize("reported", [True, False], ids=["reported", "unreported"])
async def test_journaled_token_counts_are_none_when_the_provider_reports_none(
    api: str, reported: bool, fake: FakeOpenAI, make_runtime: Make
) -> None:
    fake.add(Answer(text="Hi.", usage=reported, cached_tokens=4, reasoning_tokens=2))
    run = await run_durably(make_runtime, AGENTS[api], "hello")
    assert run.result == "Hi."
    [completed] = [r.payload for r in run.records if r.kind == "assistant_message_completed"]
    assert isinstance(completed, AssistantMessageCompleted)
    if not reported:
        assert completed.usage is None
        return
    usage = completed.usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (120, 30)
    assert (usage.cache_read_tokens, usage.reasoning_tokens) == (4, 2)


@pytest.mark.parametrize("api", sorted(AGENTS))
@pytest.mark.parametrize("reported", [True, False], ids=["reported", "unreported"])
async def test_the_taps_token_counts_are_none_when_the_provider_reports_none(
    api: str, reported: bool, fake: FakeOpenAI
) -> None:
    fake.add(Answer(text="Hi.", usage=reported))
    turn = OpenAIAgentsTurn(Runner.run_streamed(AGENTS[api](), "hi", run_config=no_tracing()))
    assert [e async for e in turn.events]
    usage = turn.usage()
    counts = (usage.input_tokens, usage.output_tokens, usage.total_tokens)
    assert counts == ((120, 30, 150) if reported else (None, None, None))
    if not reported:
        assert usage == TurnUsage(num_llm_calls=usage.num_llm_calls)


async def test_a_durable_runs_canonical_stream_carries_the_summary_as_a_summary(
    fake: FakeOpenAI, make_runtime: Make, store: Store
) -> None:
    """What a browser reads over SSE (the log's projection), not only the tap: the summary
    streams as ``reasoning_summary`` deltas in a slot that starts ``active``, and a crash's
    cut of it would close as a summary too."""
    fake.add(
        Answer(reasoning=THOUGHT, calls=(Call("lookup", {"topic": "tides"}),)),
        Answer(text="Tides turn."),
    )
    run = await run_durably(make_runtime, responses_agent, "tides?")
    events = list(project(run.records))
    for event in events:
        AGENTEX.validate_python(event.model_dump(mode="json", exclude_none=True))
    [start] = [
        e
        for e in events
        if isinstance(e, StreamTaskMessageStart) and isinstance(e.content, ReasoningContent)
    ]
    assert isinstance(start.content, ReasoningContent)
    assert (start.content.summary, start.content.content, start.content.style) == (
        [],
        [],
        "active",
    )
    deltas = [
        e.delta for e in events if isinstance(e, StreamTaskMessageDelta) and e.index == start.index
    ]
    assert deltas and all(isinstance(d, ReasoningSummaryDelta) for d in deltas)
    summaries = [d.summary_delta or "" for d in deltas if isinstance(d, ReasoningSummaryDelta)]
    assert "".join(summaries) == THOUGHT
