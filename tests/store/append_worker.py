"""Appends to one conversation until killed, printing each seq once its append returned:
what the crash test holds the store to (inline commits by default)."""

import asyncio
import sys

from tether.records import RecordDraft, UserMessage
from tether.store import SqliteStore


async def main(path: str, conversation_id: str, inline: bool) -> None:
    store = await SqliteStore.open(path, inline_commits=inline)
    head = await store.head(conversation_id)
    fence = await store.mint_fence(conversation_id)
    while True:
        drafts = [RecordDraft(UserMessage(body=f"after {head}")) for _ in range(1 + head % 3)]
        records = await store.append(conversation_id, drafts, expected_seq=head, fence=fence)
        head = records[-1].seq
        print(head, flush=True)  # acknowledged: it must survive whatever comes next


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] == "inline"))
