"""Resume from every cut of a recorded execution: the durability check every adapter shares.

The log of one finished execution is copied up to each seq, as if the process had died right
after it, and resumed with a fresh harness whose model counts its calls. Each resume must
finish with the recorded output, asking the model only for completions the cut lost, and
the resumed log must then replay with a model that refuses to be called. Over HTTP, the
fake OpenAI API counts the requests instead: a resume sends only those the cut lost, a replay
none.
"""

from collections.abc import Callable, Sequence, Sized

from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec
from tether.journal import Harness, Journal
from tether.store import MemoryStore, Store
from tether.testing import copy_prefix

from ..fakes.openai_server import Answer, FakeOpenAI

__all__ = (
    "harness_of",
    "replay_sends_nothing",
    "resume_from_every_cut",
    "resume_over_http_from_every_cut",
)


async def resume_from_every_cut(
    store: Store,
    conversation_id: str,
    expected: JsonValue,
    *,
    live: Callable[[], tuple[Harness, Sized]],
    replayer: Callable[[], Harness],
) -> None:
    """``live()`` gives a harness and the list its model appends a call to."""
    records = await store.read(conversation_id)
    started = next(r.seq for r in records if r.kind == "user_message")
    ended = next(r.seq for r in records if r.kind == "execution_ended")
    completions = sum(r.kind == "assistant_message_completed" for r in records[:ended])
    for cut in range(started, ended):
        crashed = MemoryStore()
        await copy_prefix(store, conversation_id, cut, crashed)
        harness, calls = live()
        outcome = await (await Journal.open(crashed, conversation_id)).resume(harness)
        assert outcome.output == expected, cut
        answered = sum(r.kind == "assistant_message_completed" for r in records[:cut])
        assert len(calls) == completions - answered, (cut, calls)
        replayed = await (await Journal.open(crashed, conversation_id, fence=0)).replay(replayer())
        assert replayed == [expected], cut


def harness_of(definition: AgentDefinition) -> Harness:
    """The harness a durable adapter's definition runs (to replay what it recorded)."""
    spec = definition.initialize("replay", {})
    assert isinstance(spec, AgentSpec)
    return spec.harness


async def replay_sends_nothing(
    store: Store, fake: FakeOpenAI, conversation_id: str, harness: Harness
) -> list[JsonValue]:
    """Replay the session's executions with ``harness``: their outputs, with 0 requests sent
    to the fake OpenAI API."""
    sent = fake.count
    journal = await Journal.open(store, conversation_id, fence=0)
    outputs = await journal.replay(harness)
    assert fake.count == sent, f"the replay sent a model request: {fake.requests[sent:]}"
    return outputs


async def resume_over_http_from_every_cut(
    store: Store,
    fake: FakeOpenAI,
    conversation_id: str,
    expected: JsonValue,
    answers: Sequence[Answer],
    harness: Callable[[], Harness],
) -> None:
    """Resume from every cut, the harness's real provider client asking the fake OpenAI API:
    the fake is given only the answers the cut lost, and each resume must ask for exactly
    those (no recorded call again), end with the recorded output, and then replay with 0
    requests. On memory copies: the store the run was made on is moot (memory only)."""
    if not isinstance(store, MemoryStore):
        return
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
        outcome = await (await Journal.open(crashed, conversation_id)).resume(harness())
        assert outcome.output == expected, cut
        assert fake.count - sent == completions - answered, (cut, fake.requests[sent:])
        replayed = await replay_sends_nothing(crashed, fake, conversation_id, harness())
        assert replayed == [expected], cut
