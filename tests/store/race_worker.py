"""One racer of the cross-process append test: waits for the start time, then appends once."""

import asyncio
import sys
import time

from tether.errors import TetherError
from tether.records import RecordDraft, UserMessage
from tether.store import SqliteStore


async def main(path: str, conversation_id: str, start_at: float, name: str) -> str:
    store = await SqliteStore.open(path, busy_timeout=30)  # 8 racers on a loaded machine
    try:
        await asyncio.sleep(max(0.0, start_at - time.time()))  # all racers start together
        try:
            fence = await store.mint_fence(conversation_id)
            await store.append(
                conversation_id, [RecordDraft(UserMessage(body=name))], expected_seq=1, fence=fence
            )
        except TetherError as exc:
            return type(exc).__name__
        except Exception as exc:  # anything else is a contract violation the test reports
            return f"raw:{type(exc).__module__}.{type(exc).__name__}:{exc}"
        return "ok"
    finally:
        await store.close()


if __name__ == "__main__":
    print(asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4])))
