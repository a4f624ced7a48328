"""Runs one-call executions on one conversation until killed, cutting the log's head as the
pruner would after every third, and prints the head once each execution returned: what the
retention crash test holds a cold reader to. (Run as a script by ``test_truncate``.)"""

import asyncio
import sys

from tether.journal import Journal, Turn, truncation_anchor, truncation_point
from tether.messages import ModelRequest
from tether.models import ScriptedModel
from tether.records import UserMessage
from tether.store import SqliteStore


class Echo:
    name, version = "echo", "1"

    async def run(self, turn: Turn) -> str:
        request = ModelRequest(model="test", messages=(*turn.history, *turn.inputs))
        return (await turn.model(request)).message.text


async def main(path: str, conversation_id: str) -> None:
    store = await SqliteStore.open(path, inline_commits=True)
    model = ScriptedModel(lambda request: f"echo {len(request.messages)}")
    journal = await Journal.open(store, conversation_id, model=model)
    if await journal.pending() is not None:
        await journal.resume(Echo())
    while True:
        said = sum(message.role == "user" for message in (await journal.refresh()).messages())
        await journal.exec(Echo(), [UserMessage(body=f"hello {said}")])
        print(journal.head, flush=True)  # acknowledged: it must survive whatever comes next
        if said % 3 == 2:
            view = await journal.refresh()
            through = truncation_point(view.records, keep=4)
            if through:
                anchor = truncation_anchor(
                    view.records, through, usage=None, model_calls=0, cost=None
                )
                await store.truncate_log(conversation_id, anchor)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
