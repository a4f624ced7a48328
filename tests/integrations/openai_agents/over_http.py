"""Durable Agents SDK runs over the fake OpenAI API: run, replay, resume from every cut.

The agents' models are real SDK models (``OpenAIResponsesModel`` from a name, or
``OpenAIChatCompletionsModel``) whose openai client speaks HTTP to
:class:`~tests.fakes.openai_server.FakeOpenAI`, which counts the requests that left the
process: a replay must send none, a resume none that the log answered.
"""

from collections.abc import Callable, Sequence
from typing import Any

from agents import Agent
from pydantic import JsonValue

from tether.engine import Runtime
from tether.integrations.openai_agents import OpenAIAgentsHarness, durable
from tether.records import Record
from tether.store import Store

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, FakeOpenAI
from .. import cuts

__all__ = ("MODEL", "Run", "replay_sends_nothing", "resume_from_every_cut", "run_durably")

MODEL = "gpt-4.1-mini"

Make = Callable[..., Runtime]
AgentFactory = Callable[[], Agent[Any]]


class Run:
    """A settled durable run: its settlement and its records."""

    def __init__(self, conversation_id: str, settled: dict[str, JsonValue], records: list[Record]):
        self.conversation_id = conversation_id
        self.settled = settled
        self.records = records

    @property
    def result(self) -> JsonValue:
        return self.settled.get("result")

    def kinds(self) -> list[str]:
        return [r.kind for r in self.records if "delta" not in r.kind]

    def count(self, kind: str) -> int:
        return sum(r.kind == kind for r in self.records)


async def run_durably(
    make_runtime: Make, make_agent: AgentFactory, text: str, **options: Any
) -> Run:
    async with make_runtime({"agent": durable(make_agent(), name="agent", **options)}) as runtime:
        receipt = await runtime.dispatch("agent", "me", text)
        settled = await settle(runtime, receipt.submission_id)
        records = await runtime.records(receipt.conversation_id)
    return Run(receipt.conversation_id, settled, records)


async def replay_sends_nothing(
    store: Store, fake: FakeOpenAI, conversation_id: str, make_agent: AgentFactory
) -> list[JsonValue]:
    """Replay the session with a fresh agent: the outputs, with 0 requests sent."""
    harness = OpenAIAgentsHarness(make_agent(), name="agent")
    return await cuts.replay_sends_nothing(store, fake, conversation_id, harness)


async def resume_from_every_cut(
    store: Store,
    fake: FakeOpenAI,
    conversation_id: str,
    expected: JsonValue,
    answers: Sequence[Answer],
    make_agent: AgentFactory,
) -> None:
    """:func:`..cuts.resume_over_http_from_every_cut` with a fresh agent for each resume."""
    await cuts.resume_over_http_from_every_cut(
        store,
        fake,
        conversation_id,
        expected,
        answers,
        lambda: OpenAIAgentsHarness(make_agent(), name="agent"),
    )
