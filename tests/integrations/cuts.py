"""Resume from every cut of a recorded execution: the durability check every adapter shares.

The log of one finished execution is copied up to each seq, as if the process had died right
after it, and resumed with a fresh harness whose model counts its calls. Each resume must
finish with the recorded output, asking the model only for completions the cut lost, and
the resumed log must then replay with a model that refuses to be called.
"""

from collections.abc import Callable, Sized

from pydantic import JsonValue

from tether.journal import Harness, Journal
from tether.store import MemoryStore, Store
from tether.testing import copy_prefix

__all__ = ("resume_from_every_cut",)


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
