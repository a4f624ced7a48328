"""Tether's side: the built-in ``Agent`` harness in a ``Journal`` on ``SqliteStore``
(WAL, ``synchronous=FULL``), driven by a ``ScriptedModel`` answering as the fake model does."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import JsonValue

from benchmarks.peers._fake import TEXT, TOOL, TurnsResult, reply, sqlite_bytes, tool_result
from tether.agent import Agent, Toolbox, agent_spec, tool
from tether.engine import AgentDefinition, Runtime
from tether.journal import Journal, Turn
from tether.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCall,
    ToolCallPart,
)
from tether.models import DeltaSink, ScriptedModel, Text, ToolUse
from tether.records import UserMessage
from tether.store import SessionKey, SqliteStore

__all__ = ("DURABILITY", "build_log", "latency", "log_bytes", "resume", "run_turns")

DURABILITY = (
    "SqliteStore: WAL, synchronous=FULL (every acknowledged record fsynced), "
    "inline_commits=True (commits on the agent's thread, as the peers' savers do)"
)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@tool(idempotent=True)
async def lookup(n: int) -> str:
    """The fake tool: a 300-byte answer."""
    return tool_result(n)


class FakeModel:
    """The fake model as a Tether ``Model``: O(1) a call, like the peers' fakes (``ScriptedModel``
    also renders the whole prompt to estimate token usage, which is O(history))."""

    def __init__(self, turns: int) -> None:
        self.turns = turns

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        # messages = the user's, then (assistant, tool) pairs: O(1) to count the tool results
        text, call = reply((len(request.messages) - 1) // 2, self.turns)
        if call is None:
            return ModelResponse(message=Message.assistant(text), finish_reason="stop")
        parts = (TextPart(text=text), ToolCallPart(call_id=f"c{call}", name=TOOL, args={"n": call}))
        return ModelResponse(
            message=Message(role="assistant", parts=parts), finish_reason="tool_calls"
        )


def _model(turns: int) -> FakeModel:
    return FakeModel(turns)


async def _conversation(store: SqliteStore, name: str, turns: int) -> None:
    journal = await Journal.open_session(
        store, SessionKey("bench", name), model=_model(turns), tools=Toolbox([lookup])
    )
    agent = Agent(model="bench", tools=[lookup], max_rounds=turns + 2)
    result = await journal.exec(agent, [UserMessage(body=TEXT)])
    assert result.output == TEXT, result.output


async def _run_turns(db: Path, turns: int, reps: int, inline: bool) -> TurnsResult:
    async with await SqliteStore.open(db, synchronous="FULL"):
        pass
    before = sqlite_bytes(db)
    seconds = []
    async with await SqliteStore.open(db, synchronous="FULL", inline_commits=inline) as store:
        for rep in range(reps):
            start = time.perf_counter()
            await _conversation(store, f"t{turns}-{rep}", turns)
            seconds.append(time.perf_counter() - start)
        commits = store.commits
    conn = sqlite3.connect(db)
    records, payload = conn.execute("SELECT count(*), sum(length(body)) FROM records").fetchone()
    conn.close()
    return TurnsResult(turns, seconds, sqlite_bytes(db) - before, reps, records, payload, commits)


def run_turns(directory: Path, turns: int, reps: int, *, inline: bool = True) -> TurnsResult:
    """``inline=False``: commits go through the writer thread, as in a server (the default)."""
    directory.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_run_turns(directory / "tether.db", turns, reps, inline))


async def _latency(directory: Path, samples: int) -> list[float]:
    spec = agent_spec(_model(1), model_name="bench", tools=[lookup])
    agents = {"bench": AgentDefinition(lambda instance, env: spec)}
    times = []
    async with await SqliteStore.open(directory, synchronous="FULL") as store:
        async with Runtime(agents, store, claim_interval=0.25) as runtime:
            for n in range(samples + 5):
                start = time.perf_counter()
                receipt = await runtime.dispatch("bench", f"latency-{n}", TEXT)
                settled = await runtime.wait(receipt.submission_id)
                elapsed = (time.perf_counter() - start) * 1000
                assert settled["status"] == "succeeded", settled
                if n >= 5:  # the first few warm the runtime up
                    times.append(elapsed)
    return times


def latency(directory: Path, samples: int) -> list[float]:
    """Admission → settled: ``Runtime.dispatch`` of a 1-turn conversation (durable queue row,
    claim, run, settlement) until ``Runtime.wait`` sees it settled."""
    return asyncio.run(_latency(directory, samples))


class _Builder:
    """Writes the same records a turn of the agent writes, with requests built from the
    execution's inputs only, so a 10k-record log is quick to build (no growing prompt)."""

    name, version = "tether.agent", "1"

    def __init__(self, turns: int) -> None:
        self.turns = turns

    async def run(self, turn: Turn) -> JsonValue:
        request = ModelRequest(model="bench", messages=tuple(turn.inputs))
        for n in range(self.turns):
            first = await turn.model(request.model_copy(update={"model": f"m{n}"}))
            [call] = first.message.tool_calls
            await turn.tool(
                ToolCall(
                    call_id=call.call_id,
                    name=call.name,
                    args=call.args,
                    idempotency_key=f"{turn.execution_id}:{n}",
                )
            )
        return (await turn.model(request.model_copy(update={"model": "final"}))).message.text


async def _build_log(directory: Path, records: int) -> int:
    def answer(request: ModelRequest) -> object:
        if request.model == "final":
            return TEXT
        return [Text(TEXT), ToolUse("lookup", {"n": 0}, f"c-{request.model}")]

    async with await SqliteStore.open(directory, synchronous="FULL") as store:
        conversation, _ = await store.ensure_conversation(
            SessionKey("bench", "resume"), conversation_id="resume", created_at=NOW
        )
        journal = await Journal.open(
            store, conversation.id, model=ScriptedModel(answer), tools=Toolbox([lookup])
        )
        while (head := await store.head(conversation.id)) < records:
            turns = max(1, min(50, (records - head) // 5))
            await journal.exec(_Builder(turns), [UserMessage(body=TEXT)])
        return await store.head(conversation.id)


def log_bytes(directory: Path) -> tuple[int, int]:
    """A built log's bytes on disk, and those of its snapshot (0 if it has none)."""
    db = directory / "tether.db"
    conn = sqlite3.connect(db)
    (snapshot,) = conn.execute("SELECT coalesce(sum(length(body)), 0) FROM snapshots").fetchone()
    conn.close()
    return sqlite_bytes(db), int(snapshot)


def build_log(directory: Path, records: int) -> int:
    """A conversation of about ``records`` records (model and tool calls, as the agent writes);
    returns how many."""
    return asyncio.run(_build_log(directory, records))


class _NextTurnModel:
    """The fake model for the turn after a resume: a tool call, then (once its result is in)
    the final answer; O(1) a call however long the history it is sent."""

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        if request.messages[-1].role == "tool":
            return ModelResponse(message=Message.assistant(TEXT), finish_reason="stop")
        parts = (TextPart(text=TEXT), ToolCallPart(call_id="c-next", name=TOOL, args={"n": 0}))
        return ModelResponse(
            message=Message(role="assistant", parts=parts), finish_reason="tool_calls"
        )


async def _resume(directory: Path) -> tuple[float, int]:
    start = time.perf_counter()
    async with await SqliteStore.open(directory, synchronous="FULL", inline_commits=True) as store:
        journal = await Journal.open(
            store, "resume", model=_NextTurnModel(), tools=Toolbox([lookup])
        )
        result = await journal.exec(Agent(model="bench", tools=[lookup]), [UserMessage(body=TEXT)])
        elapsed = time.perf_counter() - start
        assert result.output == TEXT, result.output
        return elapsed * 1000, await store.head("resume")


def resume(directory: Path) -> tuple[float, int]:
    """Cold resume (run in a fresh process): open the store and the conversation's journal,
    then run the first turn after it, a ``Journal.exec`` of the agent with the fake model
    (a tool call, its outcome, the final answer; commits on this thread, as in ``run_turns``),
    until it returns, every record on disk. Returns (ms, records in the log after the turn)."""
    return asyncio.run(_resume(directory))
