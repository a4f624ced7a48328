"""Replay of a 10k-record session beside a plain read of the same log.

    python benchmarks/replay.py [--records 10000] [--rounds 3]

Builds a session on SQLite (``synchronous=FULL``) whose turns each make a model call, a
host tool call and a second model call (9 records a turn), then times, in the same run:

- read: ``store.read`` of the whole log (the floor: the records must be read either way);
- replay: ``Journal.replay`` of every turn, serving every effect from the log with zero
  model and tool invocations (it reads the log itself, so the read is included).

The harness builds its requests from the turn's inputs only, so the figure is the
journal's cost rather than a growing prompt's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import JsonValue

from benchmarks._table import print_table
from tether.journal import Journal, Turn
from tether.messages import ModelRequest, ModelResponse, ToolCall
from tether.records import UserMessage
from tether.store import SessionKey, SqliteStore
from tether.testing import RecordingTools, ScriptedModel, tool_call_response

RECORDS_PER_TURN = 9


class BenchHarness:
    name, version = "bench", "1"

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="bench", messages=tuple(turn.inputs))
        first = await turn.model(request)
        [call] = first.message.tool_calls
        result = await turn.tool(
            ToolCall(
                call_id=call.call_id,
                name=call.name,
                args=call.args,
                idempotency_key=f"{turn.execution_id}:1",
            )
        )
        second = await turn.model(
            request.model_copy(update={"messages": (*request.messages, first.message)})
        )
        return [result.content, second.message.text]


def reply(request: ModelRequest) -> ModelResponse | str:
    if len(request.messages) == 1:
        return tool_call_response(("c1", "lookup", {"q": request.messages[0].text}))
    return "x" * 300


async def build(store: SqliteStore, turns: int) -> str:
    conversation, _ = await store.ensure_conversation(
        SessionKey("bench", "replay"), conversation_id="replay", created_at=datetime.now(UTC)
    )
    journal = await Journal.open(
        store, conversation.id, model=ScriptedModel(reply), tools=RecordingTools()
    )
    for n in range(turns):
        await journal.exec(BenchHarness(), [UserMessage(body=f"question {n} " + "y" * 280)])
    return conversation.id


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    turns = max(1, args.records // RECORDS_PER_TURN)
    with tempfile.TemporaryDirectory(prefix="tether-bench-", dir=Path.cwd()) as tmp:
        async with await SqliteStore.open(Path(tmp)) as store:
            cid = await build(store, turns)
            total = await store.head(cid)
            reads, replays = [], []
            for _ in range(args.rounds):
                start = time.perf_counter()
                assert len(await store.read(cid, limit=1_000_000)) == total
                reads.append(time.perf_counter() - start)
                journal = await Journal.open(store, cid, fence=0)
                start = time.perf_counter()
                outputs = await journal.replay(BenchHarness())
                replays.append(time.perf_counter() - start)
                assert len(outputs) == turns
    read, replay = statistics.median(reads), statistics.median(replays)
    ratio = replay / read
    print_table(
        f"Replay of a {total:,}-record session ({turns:,} turns) vs reading it "
        f"(SQLite, median of {args.rounds})",
        ("metric", "time", "records/s", "vs read", "goal", "met"),
        [
            ("read the log", f"{read * 1000:.1f} ms", f"{total / read:,.0f}", "1.00x", "", ""),
            (
                "replay every turn",
                f"{replay * 1000:.1f} ms",
                f"{total / replay:,.0f}",
                f"{ratio:.2f}x",
                "<= 3x the read",
                "yes" if ratio <= 3 else "NO",
            ),
        ],
    )


if __name__ == "__main__":
    asyncio.run(main())
