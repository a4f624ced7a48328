"""A small agent to record sessions of and replay them against changed code."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec, Runtime
from tether.journal import Turn
from tether.messages import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec
from tether.models import EchoModel
from tether.records import Record
from tether.store import MemoryStore, Store, export_chunks
from tether.testing import RecordingTools

FAST: dict[str, Any] = {"claim_interval": 0.02, "lease": 2.0}


@dataclass
class Forecaster:
    """Asks the model, then the ``forecast`` tool for ``city``; answers with both."""

    prompt: str = "Answer briefly."
    city: str = "Paris"
    version: str = "1"
    history: bool = True
    extra_call: bool = False
    skip_tool: bool = False
    suffix: str = ""
    name: str = "forecaster"

    async def run(self, turn: Turn) -> JsonValue:
        past = turn.history if self.history else []
        request = ModelRequest(
            model="echo",
            messages=(Message.system(self.prompt), *past, *turn.inputs),
            tools=(ToolSpec(name="forecast", description="The weather of a city."),),
        )
        answer = await turn.model(request)
        if self.skip_tool:
            return answer.message.text
        calls = 2 if self.extra_call else 1
        results = []
        for n in range(1, calls + 1):
            call = ToolCall(
                call_id=f"call-{n}",
                name="forecast",
                args={"city": self.city},
                idempotency_key=f"{turn.execution_id}:call-{n}",
            )
            results.append((await turn.tool(call)).content)
        return f"{answer.message.text} / {' '.join(results)}{self.suffix}"


class NoModel:
    """A model that must never be asked: a replay calls none."""

    async def request(self, request: ModelRequest, stream: object = None) -> ModelResponse:
        raise AssertionError("a replay asked the model")


def agents(harness: Forecaster | None = None) -> dict[str, AgentDefinition]:
    """The ``forecaster`` agent running ``harness``; with none, the one that recorded."""

    def initialize(instance: str, env: object) -> AgentSpec:
        if harness is None:
            return AgentSpec(harness=Forecaster(), model=EchoModel(), tools=RecordingTools())
        return AgentSpec(harness=harness, model=NoModel(), tools=RecordingTools())

    return {"forecaster": AgentDefinition(initialize)}


async def record(store: Store | None = None, *messages: str) -> str:
    """A finished session of the recording ``forecaster`` (two turns unless ``messages``);
    its conversation id."""
    runtime = Runtime(agents(), store or MemoryStore(), **FAST)
    await runtime.start()
    try:
        receipt = None
        for text in messages or ("hello", "and tomorrow?"):
            receipt = await runtime.dispatch("forecaster", "ann", text)
            settled = await runtime.wait(receipt.submission_id)
            assert settled["status"] == "succeeded", settled
        assert receipt is not None
        return receipt.conversation_id
    finally:
        await runtime.close()


async def export_to(store: Store, conversation_id: str, path: Path) -> Path:
    """The log as ``tether export`` writes it: its records, then the trailer."""

    async def read(after: int, limit: int) -> list[Record]:
        return await store.read(conversation_id, after_seq=after, limit=limit)

    chunks = [chunk async for chunk in export_chunks(read, conversation_id)]
    await asyncio.to_thread(path.write_bytes, b"".join(chunks))
    return path


RECORDED = agents()
"""The recording agents as a mapping (``--app tests.testing.replayed:RECORDED``)."""


def rome() -> dict[str, AgentDefinition]:
    """The forecaster asking for another city than it recorded (``--app ...:rome``)."""
    return agents(Forecaster(city="Rome"))
