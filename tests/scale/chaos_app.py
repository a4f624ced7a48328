"""The app the chaos test's worker and API processes load (``tests.scale.chaos_app:agents``).

One agent, ``chaos``: a harness that asks a slow scripted model for ``"echo: <body>"``, then
runs a slow durable step, then answers with the model's text. Every process that loads it
audits itself into the JSON-lines file named by ``TETHER_CHAOS_LOG`` (one ``write`` per line,
``O_APPEND``, so lines from concurrent processes never interleave):

- ``started``: the process loaded the app (its pid is a worker's or the API node's);
- ``model_start`` / ``model_end``: one model invocation, with the request's input hash;
- ``step_start`` / ``step_end``: one run of the durable step's function;
- ``rejected``: an effect's journal write was refused (``Fenced``, ``Conflict``, ...);
- ``log``: a warning or error the engine or journal logged (an attempt that crashed, a
  failure record that could not be written).

Each effect runs in a task of its own, and the harness lets it finish before it gives in to a
cancellation of the attempt: an invocation already in flight completes and tries to journal
its outcome. A worker frozen mid-call that wakes up after its lease was taken over runs its
heartbeat (which finds the claim lost and cancels the run) and its pending write in either
order; waiting makes the late write certain instead of a race, so the test can insist on
seeing it refused.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import random
import time
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec
from tether.errors import Conflict, Fenced, TetherError
from tether.journal import Turn
from tether.messages import Message, ModelRequest, ModelResponse, Usage
from tether.models import DeltaSink

__all__ = ("AGENT", "LOG_ENV", "MODEL_SECONDS", "agents", "answer", "model_seconds")

AGENT = "chaos"
LOG_ENV = "TETHER_CHAOS_LOG"
MODEL_SECONDS = (0.25, 0.45)
STEP_SECONDS = (0.05, 0.12)
T = TypeVar("T")


def answer(body: str) -> str:
    return f"echo: {body}"


def model_seconds(input_hash: str) -> float:
    """How long the model takes for this input: known in advance, so the test can tell how
    long a call it sees start has left to run."""
    return random.Random(input_hash).uniform(*MODEL_SECONDS)


def audit(event: str, **fields: JsonValue) -> None:
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    line = json.dumps({"pid": os.getpid(), "t": time.time(), "event": event, **fields})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


class _AuditHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        audit(
            "log",
            logger=record.name,
            level=record.levelname,
            message=record.getMessage(),
            exc=None if record.exc_info is None else repr(record.exc_info[1]),
        )


class ChaosModel:
    """Answers ``"echo: <last user text>"`` after a pause, auditing every invocation."""

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        input_hash = request.input_hash()
        body = request.messages[-1].text
        audit("model_start", input=body, hash=input_hash)
        await asyncio.sleep(model_seconds(input_hash))
        audit("model_end", input=body, hash=input_hash)
        return ModelResponse(
            message=Message.assistant(answer(body)),
            usage=Usage(input_tokens=len(body), output_tokens=len(body) + 6),
            finish_reason="stop",
        )


class ChaosHarness:
    name = "chaos"
    version = "1"

    async def run(self, turn: Turn) -> JsonValue:
        body = turn.inputs[-1].text
        request = ModelRequest(model="chaos", messages=(*turn.history, *turn.inputs))
        response = await _unstoppable(turn.model(request), body, "model")
        await _unstoppable(turn.step("work", functools.partial(_work, body)), body, "step")
        return response.message.text


async def _work(body: str) -> JsonValue:
    audit("step_start", input=body)
    await asyncio.sleep(random.Random(body).uniform(*STEP_SECONDS))
    audit("step_end", input=body)
    return {"length": len(body)}


async def _unstoppable(effect: Coroutine[Any, Any, T], body: str, name: str) -> T:
    task = asyncio.ensure_future(effect)
    task.add_done_callback(functools.partial(_audit_outcome, body, name))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})  # the effect finishes (and journals) before we give in
        raise


def _audit_outcome(body: str, name: str, task: asyncio.Future[Any]) -> None:
    if task.cancelled():
        audit("cancelled", input=body, effect=name)
        return
    error = task.exception()  # retrieved here, so an orphaned failure is never "unretrieved"
    if error is None:
        return
    fields: dict[str, JsonValue] = {"input": body, "effect": name, "error": type(error).__name__}
    if isinstance(error, Fenced):
        fields.update(fence=error.fence, currentFence=error.current_fence)
    elif isinstance(error, Conflict):
        fields.update(expectedSeq=error.expected_seq, actualSeq=error.actual_seq)
    if isinstance(error, TetherError):
        audit("rejected", **fields)
    else:
        audit("effect_failed", detail=repr(error), **fields)


def agents() -> Mapping[str, AgentDefinition]:
    """The factory ``--app tests.scale.chaos_app:agents`` names."""
    # A handler of our own replaces logging's last resort, so keep stderr too.
    handlers = (_AuditHandler(logging.WARNING), logging.StreamHandler())
    for handler in handlers:
        handler.setLevel(logging.WARNING)
        for name in ("tether", "asyncio", "psycopg"):  # asyncio: exceptions nobody handled
            logging.getLogger(name).addHandler(handler)
    audit("started")
    spec = AgentSpec(harness=ChaosHarness(), model=ChaosModel())
    return {AGENT: AgentDefinition(lambda instance, env: spec, max_attempts=20)}
