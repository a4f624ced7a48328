"""Runs one-call executions on one conversation until killed, keeping a snapshot after every
one, and prints the head once each execution returned: what the snapshot crash test holds a
cold reader to. (Run as a script by ``test_snapshot``.)"""

import asyncio
import sys

import tether.journal._snapshot_cache as cache_module
from tether.journal import Journal, Turn
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.records import UserMessage
from tether.store import SqliteStore


class Echo:
    name, version = "echo", "1"

    async def run(self, turn: Turn) -> str:
        request = ModelRequest(model="test", messages=(*turn.history, *turn.inputs))
        return (await turn.model(request)).message.text


def every_time(head: int, last: int) -> bool:
    return head > last  # a snapshot after every execution: most kills land near one


async def main(path: str, conversation_id: str) -> None:
    setattr(cache_module, "snapshot_due", every_time)  # noqa: B010 - a private name, replaced
    store = await SqliteStore.open(path, inline_commits=True)
    model = ScriptedModel(lambda request: f"echo {len(request.messages)}")
    journal = await Journal.open(store, conversation_id, model=model)
    if await journal.pending() is not None:
        await journal.resume(Echo())
    while True:
        await journal.exec(Echo(), [UserMessage(body="hello " + "x" * 200)])
        print(journal.head, flush=True)  # acknowledged: it must survive whatever comes next


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
