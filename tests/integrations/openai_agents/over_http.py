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
from tether.journal import Journal
from tether.records import Record
from tether.store import MemoryStore, Store
from tether.testing import copy_prefix

from ...engine.test_runtime import settle
from ...fakes.openai_server import Answer, FakeOpenAI

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
    sent = fake.count
    journal = await Journal.open(store, conversation_id, fence=0)
    outputs = await journal.replay(OpenAIAgentsHarness(make_agent(), name="agent"))
    assert fake.count == sent, "the replay sent a model request"
    return outputs


async def resume_from_every_cut(
    store: Store,
    fake: FakeOpenAI,
    conversation_id: str,
    expected: JsonValue,
    answers: Sequence[Answer],
    make_agent: AgentFactory,
) -> None:
    """Copy the log up to each seq of the execution and resume it, the fake given only the
    answers the cut lost: the resume must ask for exactly those (no recorded call again) and
    end with the recorded output; the resumed log then replays with 0 requests."""
    if not isinstance(store, MemoryStore):
        return  # the cuts are resumed on memory copies: the store the run was made on is moot
    records = await store.read(conversation_id)
    started = next(r.seq for r in records if r.kind == "user_message")
    ended = next(r.seq for r in records if r.kind == "execution_ended")
    completions = sum(r.kind == "assistant_message_completed" for r in records[:ended])
    assert completions == len(answers)
    for cut in range(started, ended):
        crashed = MemoryStore()
        await copy_prefix(store, conversation_id, cut, crashed)
        answered = sum(r.kind == "assistant_message_completed" for r in records[:cut])
        fake.add(*answers[answered:])  # each resume takes exactly these, so the script stays even
        sent = fake.count
        journal = await Journal.open(crashed, conversation_id)
        outcome = await journal.resume(OpenAIAgentsHarness(make_agent(), name="agent"))
        assert outcome.output == expected, cut
        assert fake.count - sent == completions - answered, (cut, fake.requests[sent:])
        replayed = await replay_sends_nothing(crashed, fake, conversation_id, make_agent)
        assert replayed == [expected], cut
