"""Replay of a 10k-record session beside a plain read of the same log.

    python benchmarks/replay.py [--records 10000] [--rounds 3]

Builds two sessions on SQLite (``synchronous=FULL``) whose turns each make a model call,
a host tool call and a second model call (9 records a turn): one recorded by a harness
that builds its requests from the turn's inputs alone, one by a harness that sends its
whole history each time, as every framework adapter does. Then times, in the same run:

- read: ``store.read`` of the whole log. Records decode lazily, so this reads bytes only;
- read and decode: the read, then every record's typed payload (the collector paused, as
  in Tether's own bulk decodes): the floor of any pass that looks at what the records say;
- replay: ``Journal.replay`` of every turn, serving every effect from the log with zero
  model and tool invocations (it reads and decodes the log itself, so both are included).

The goal (issue 3) is a replay within 3x the read and decode, for the first harness: the
second one's extra cost is its own, building and sending a request as long as the history
(which a live run pays as well), shown so that growth stays in view. It is judged from
10,000 records; the script ends with its goals table.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from pydantic import JsonValue

from benchmarks._measure import scratch
from benchmarks._table import Goal, judged, print_goals, print_table
from tether.journal import Journal, Turn
from tether.messages import Message, ModelRequest, ModelResponse, ToolCall
from tether.models import ScriptedModel
from tether.records import UserMessage
from tether.store import SessionKey, SqliteStore
from tether.testing import RecordingTools, tool_call_response

RECORDS_PER_TURN = 9


class BenchHarness:
    """Requests from the turn's inputs only: the figure is the journal's, not a prompt's."""

    name, version = "bench", "1"

    def prompt(self, turn: Turn) -> tuple[Message, ...]:
        return tuple(turn.inputs)

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="bench", messages=self.prompt(turn))
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


class AgentHarness(BenchHarness):
    """Sends the whole transcript each time, as an agent loop (and every adapter) does."""

    name = "bench-agent"

    def prompt(self, turn: Turn) -> tuple[Message, ...]:
        return (*turn.history, *turn.inputs)


def reply(request: ModelRequest) -> ModelResponse:
    """A whole response, so the scripted model does no work per message of a long prompt."""
    last = request.messages[-1]
    if last.role == "user":
        return tool_call_response(("c1", "lookup", {"q": last.text}))
    return ModelResponse(message=Message.assistant("x" * 300))


async def build(store: SqliteStore, turns: int, harness: BenchHarness | None = None) -> str:
    harness = harness or BenchHarness()
    conversation, _ = await store.ensure_conversation(
        SessionKey("bench", harness.name),
        conversation_id=harness.name,
        created_at=datetime.now(UTC),
    )
    journal = await Journal.open(
        store, conversation.id, model=ScriptedModel(reply), tools=RecordingTools()
    )
    for n in range(turns):
        await journal.exec(harness, [UserMessage(body=f"question {n} " + "y" * 280)])
    return conversation.id


async def read_and_decode(store: SqliteStore, conversation_id: str) -> int:
    records = await store.read(conversation_id, limit=1_000_000)
    paused = gc.isenabled()
    gc.disable()
    try:
        for record in records:
            record.payload  # noqa: B018 - decoding is what is measured
    finally:
        if paused:
            gc.enable()
    return len(records)


Runner = Callable[[], Awaitable[None]]


async def timed(run: Runner) -> float:
    """Each run ends with a young collection: what a paused collector deferred is paid by the
    run that allocated it, not by the next one."""
    start = time.perf_counter()
    await run()
    gc.collect(0)
    return time.perf_counter() - start


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    turns = max(1, args.records // RECORDS_PER_TURN)
    harnesses = (BenchHarness(), AgentHarness())
    with scratch() as tmp:
        async with await SqliteStore.open(tmp) as store:
            ids = [await build(store, turns, harness) for harness in harnesses]
            total = await store.head(ids[0])

            async def read() -> None:
                assert len(await store.read(ids[0], limit=1_000_000)) == total

            async def decode() -> None:
                assert await read_and_decode(store, ids[0]) == total

            def replay(harness: BenchHarness, conversation_id: str) -> Runner:
                async def run() -> None:
                    journal = await Journal.open(store, conversation_id, fence=0)
                    assert len(await journal.replay(harness)) == turns

                return run

            runs = {
                "read": read,
                "decode": decode,
                **{h.name: replay(h, cid) for h, cid in zip(harnesses, ids, strict=True)},
            }
            # Interleaved rounds: a drift of the shared machine lands on every row alike.
            times: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.rounds):
                for name, run in runs.items():
                    times[name].append(await timed(run))
    t = {name: statistics.median(values) for name, values in times.items()}
    read_s, decode_s = t["read"], t["decode"]

    def row(label: str, seconds: float) -> tuple[str, ...]:
        return (
            label,
            f"{seconds * 1000:.1f} ms",
            f"{total / seconds:,.0f}",
            f"{seconds / read_s:.2f}x",
            f"{seconds / decode_s:.2f}x",
        )

    replay_s = t[harnesses[0].name]
    print_table(
        f"Replay of a {total:,}-record session ({turns:,} turns) vs reading it "
        f"(SQLite, median of {args.rounds})",
        ("metric", "time", "records/s", "vs read", "vs read+decode"),
        [
            row("read the log", read_s),
            row("read and decode every record", decode_s),
            row("replay every turn", replay_s),
            row("replay, harness sends its history", t[harnesses[1].name]),
        ],
    )
    ratio = replay_s / decode_s
    print_goals(
        [
            Goal(
                "replay ≤ 3x the read and decode of its log",
                f"{ratio:.2f}x ({total:,} records)",
                judged(ratio <= 3, args.records >= 10_000),
            )
        ]
    )


if __name__ == "__main__":
    asyncio.run(main())
