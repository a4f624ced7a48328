"""The engine with a zero-latency model: admission → settled latency, overhead per turn as a
conversation grows, and throughput across parallel sessions.

    python benchmarks/engine.py [--samples 200]

Runs on SQLite at ``synchronous=FULL`` (every acknowledged step is on disk) and prints,
beside each figure, the floor measured in the same run: one raw ``sqlite3`` commit, and
the raw model call the harness wraps. It ends with its goals: admission → settled p50 at
most 2 ms (judged from 100 samples); a turn's time, less its raw model call, flat in the
conversation's length (the longest within +20% of the shortest, judged with lengths of 100
and more); an agent turn (a tool call and 20 streamed deltas) at most 1 ms over its raw model
call (judged from 10 turns).
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

from pydantic import JsonValue

from benchmarks._measure import percentile, raw_commit_ms, scratch
from benchmarks._table import Goal, judged, print_goals, print_table
from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.journal import Turn
from tether.messages import ModelRequest
from tether.models import ScriptedModel, Text, ToolUse
from tether.store import SqliteStore

REPLY = "x" * 300


class ChatHarness:
    """One model call over the whole history: the common shape of a chat turn."""

    name, version = "chat", "1"

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="bench", messages=(*turn.history, *turn.inputs))
        return (await turn.model(request)).message.text


async def latency(runtime: Runtime, samples: int) -> list[float]:
    times = []
    for n in range(samples):
        start = time.perf_counter()
        receipt = await runtime.dispatch("chat", f"latency-{n}", "hello")
        await runtime.wait(receipt.submission_id)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def turn_overhead(
    runtime: Runtime, model: ScriptedModel, checkpoints: list[int]
) -> dict[int, tuple[float, float]]:
    """Per-turn time at each checkpoint length, beside a raw call of the same request."""
    figures: dict[int, tuple[float, float]] = {}
    for turn in range(1, max(checkpoints) + 1):
        start = time.perf_counter()
        receipt = await runtime.dispatch("chat", "growing", f"message {turn}")
        await runtime.wait(receipt.submission_id)
        elapsed = (time.perf_counter() - start) * 1000
        if turn in checkpoints:
            request = model.calls[-1]
            raw_start = time.perf_counter()
            await model.request(request)
            raw = (time.perf_counter() - raw_start) * 1000
            figures[turn] = (elapsed, raw)
    return figures


def tool_rounds_agent(rounds: int) -> tuple[AgentSpec, ScriptedModel]:
    """An agent whose one execution makes ``rounds`` model calls, each asking for a tool and
    streaming 20 deltas, then answers."""

    def reply(request: ModelRequest) -> object:
        done = sum(1 for m in request.messages if m.role == "tool")
        if done >= rounds:
            return "x" * 300
        return [Text("y" * 200), ToolUse("lookup", {"n": done}, f"call-{done}")]

    model = ScriptedModel(reply, chunk=10)  # 200 characters in 20 deltas
    return agent_spec(model, model_name="test", tools=[lookup], max_rounds=rounds + 5), model


@tool(idempotent=True)
async def lookup(n: int) -> int:
    """A zero-latency tool."""
    return n


async def tool_turns(store: SqliteStore, rounds: int) -> tuple[float, float]:
    """Per agent turn (a streamed model call plus one tool call), inside one execution, beside the
    same model call made raw."""
    spec, model = tool_rounds_agent(rounds)
    agents = {"tools": AgentDefinition(lambda instance, env: spec)}
    async with Runtime(agents, store) as runtime:
        start = time.perf_counter()
        receipt = await runtime.dispatch("tools", f"rounds-{rounds}", "go")
        settled = await runtime.wait(receipt.submission_id)
        assert settled["status"] == "succeeded", settled
        per_turn = (time.perf_counter() - start) * 1000 / (rounds + 1)
    sample = model.calls[len(model.calls) // 2]

    async def sink(delta: object) -> None:
        return None

    raw_start = time.perf_counter()
    for _ in range(20):
        await model.request(sample, sink)
    raw = (time.perf_counter() - raw_start) * 1000 / 20
    return per_turn, raw


async def throughput(runtime: Runtime, sessions: int, turns: int) -> float:
    async def session(n: int) -> None:
        for turn in range(turns):
            receipt = await runtime.dispatch("chat", f"tp-{sessions}-{n}", f"turn {turn}")
            await runtime.wait(receipt.submission_id)

    start = time.perf_counter()
    await asyncio.gather(*(session(n) for n in range(sessions)))
    return sessions * turns / (time.perf_counter() - start)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--tp-turns", type=int, default=20)
    parser.add_argument("--tool-rounds", type=int, nargs="+", default=[10, 100, 500])
    args = parser.parse_args()
    model = ScriptedModel(lambda request: REPLY)
    agents = {
        "chat": AgentDefinition(lambda instance, env: AgentSpec(harness=ChatHarness(), model=model))
    }
    with scratch() as tmp:
        floor = raw_commit_ms(tmp / "raw.db")
        async with await SqliteStore.open(tmp / "engine") as store:
            async with Runtime(agents, store, claim_interval=0.25) as runtime:
                times = await latency(runtime, args.samples)
                commits_before = store.commits
                await latency(runtime, 20)
                commits = (store.commits - commits_before) / 20
                overhead = await turn_overhead(runtime, model, args.turns)
                rates = {n: await throughput(runtime, n, args.tp_turns) for n in args.sessions}
            tool_figures = {n: await tool_turns(store, n) for n in args.tool_rounds}
    p50, p99 = statistics.median(times), percentile(times, 0.99)
    print_table(
        f"Engine on SQLite (synchronous=FULL), zero-latency model; "
        f"one raw sqlite3 commit = {floor:.2f} ms; {commits:.1f} commits per submission",
        ("metric", "tether", "floor"),
        [
            (
                "admission -> settled p50",
                f"{p50:.2f} ms",
                f"{commits * floor:.2f} ms ({commits:.0f} commits)",
            ),
            ("admission -> settled p99", f"{p99:.2f} ms", ""),
            *[
                (
                    f"turn at conversation length {turn}",
                    f"{t:.2f} ms",
                    f"raw model call {raw:.3f} ms",
                )
                for turn, (t, raw) in overhead.items()
            ],
            *[
                (f"turns/s with {n} parallel sessions", f"{rate:,.0f}", "")
                for n, rate in rates.items()
            ],
            *[
                (
                    f"agent turn (tool + 20 deltas), {n} turns",
                    f"{t:.2f} ms",
                    f"raw model call {raw:.3f} ms",
                )
                for n, (t, raw) in tool_figures.items()
            ],
        ],
    )
    goals = [
        Goal(
            "engine admission → settled p50 ≤ 2 ms",
            f"{p50:.3f} ms ({len(times)} samples)",
            judged(p50 <= 2, len(times) >= 100),
        )
    ]
    first, last = min(overhead), max(overhead)
    own = {turn: t - raw for turn, (t, raw) in overhead.items()}
    growth = own[last] / own[first] if own[first] > 0 else float("inf")
    goals.append(
        Goal(
            "engine turn, less its raw model call, flat in conversation length "
            "(the longest within +20% of the shortest)",
            f"{growth:.2f}x (length {last}: {own[last]:.2f} ms, length {first}: "
            f"{own[first]:.2f} ms)"
            if last != first
            else f"one length only ({first}: {own[first]:.2f} ms)",
            judged(growth <= 1.2, last != first and last >= 100),
        )
    )
    for n, (t, raw) in tool_figures.items():
        goals.append(
            Goal(
                f"engine agent turn (a tool call + 20 streamed deltas), {n} turns, "
                "≤ 1 ms over its raw model call",
                f"{t - raw:.2f} ms over ({t:.2f} ms, raw {raw:.3f} ms)",
                judged(t - raw <= 1, n >= 10),
            )
        )
    print_goals(goals)


if __name__ == "__main__":
    asyncio.run(main())
