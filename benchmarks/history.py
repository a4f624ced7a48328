"""Flat in history: what a turn of the built-in agent costs as its session's log grows, and
what opening a long session cold and taking its first turn costs.

    python benchmarks/history.py [--records 1000 10000] [--turns 50]

The built-in agent with a system prompt (as the demo's), a zero-latency model that answers
without reading the history, on SQLite (``synchronous=FULL``, the default). For each length
in ``--records``, the session is grown turn by turn to that many records, then ``--turns``
more turns are timed: the median CPU time (this process's, so a loaded machine's other work
is not counted) and wall time per turn. At the longest length the store is then closed, and
a new store and runtime open it and take one turn: the cold open plus first turn, beside a
warm turn. Goals (issue 45, item 3): a turn at the longest length within 1.2x a turn at the
shortest; the cold open and first turn at most 50 ms and at most 2x a warm turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script, this file's folder would head sys.path, and benchmarks/http.py stand in
    # for the standard library's http package: the repository's root instead.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from benchmarks._measure import scratch
from benchmarks._table import Goal, judged, print_goals, print_table
from tether.agent import agent_spec
from tether.engine import AgentDefinition, Runtime
from tether.messages import Message, ModelResponse
from tether.models import ScriptedModel
from tether.store import SqliteStore

SESSION = "long"
REPLY = ModelResponse(message=Message.assistant("x" * 300))


def agents() -> dict[str, AgentDefinition]:
    spec = agent_spec(
        ScriptedModel(lambda request: REPLY),
        model_name="bench",
        system_prompt="You are a helpful assistant. Answer briefly.",
    )
    return {"chat": AgentDefinition(lambda instance, env: spec)}


async def turn(runtime: Runtime, n: int) -> tuple[float, float, str]:
    """One turn: (CPU ms, wall ms, the session's conversation)."""
    cpu, wall = time.process_time(), time.perf_counter()
    receipt = await runtime.dispatch("chat", SESSION, f"message {n}")
    settled = await runtime.wait(receipt.submission_id)
    assert settled["status"] == "succeeded", settled
    cpu, wall = (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000
    return cpu, wall, receipt.conversation_id


async def grow_and_time(
    directory: Path, lengths: list[int], turns: int
) -> tuple[dict[int, tuple[float, float]], float, float]:
    figures: dict[int, tuple[float, float]] = {}
    n = 0
    async with await SqliteStore.open(directory) as store:
        async with Runtime(agents(), store) as runtime:
            for length in sorted(lengths):
                *_, conversation = await turn(runtime, n)
                n += 1
                while await store.head(conversation) < length:
                    await turn(runtime, n)
                    n += 1
                timed = [await turn(runtime, n + k) for k in range(turns)]
                n += turns
                figures[length] = (
                    statistics.median(t[0] for t in timed),
                    statistics.median(t[1] for t in timed),
                )
    async with await SqliteStore.open(directory) as store:
        wall = time.perf_counter()
        async with Runtime(agents(), store) as runtime:
            await turn(runtime, n)
            cold = (time.perf_counter() - wall) * 1000
            warm = statistics.median([(await turn(runtime, n + 1 + k))[1] for k in range(turns)])
    return figures, cold, warm


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--turns", type=int, default=50)
    args = parser.parse_args()
    with scratch() as tmp:
        figures, cold, warm = await grow_and_time(tmp / "history", args.records, args.turns)
    print_table(
        "A turn of the built-in agent (system prompt, zero-latency model) as its log grows; "
        "SQLite, synchronous=FULL",
        ("records in the session", "CPU per turn (median)", "wall per turn (median)"),
        [
            (f"{length:,}", f"{cpu:.2f} ms", f"{wall:.2f} ms")
            for length, (cpu, wall) in figures.items()
        ]
        + [(f"{max(figures):,}: cold open + first turn", "", f"{cold:.1f} ms")]
        + [(f"{max(figures):,}: warm turn after it", "", f"{warm:.2f} ms")],
    )
    shortest, longest = min(figures), max(figures)
    growth = figures[longest][0] / figures[shortest][0]
    judge = longest >= 10 * shortest and shortest >= 1000
    print_goals(
        [
            Goal(
                f"a turn at {longest:,} records within 1.2x a turn at {shortest:,} (CPU)",
                f"{growth:.2f}x ({figures[longest][0]:.2f} ms vs {figures[shortest][0]:.2f} ms)",
                judged(growth <= 1.2, judge),
            ),
            Goal(
                f"cold open + first turn of a {longest:,}-record session ≤ 50 ms",
                f"{cold:.1f} ms",
                judged(cold <= 50, longest >= 10_000),
            ),
            Goal(
                "cold open + first turn ≤ 2x a warm turn",
                f"{cold / warm:.1f}x ({cold:.1f} ms vs {warm:.2f} ms)",
                judged(cold <= 2 * warm, longest >= 10_000),
            ),
        ]
    )


if __name__ == "__main__":
    asyncio.run(main())
