"""basic: one agent on SQLite, one slow tool, an observer and an interceptor logging to stdout.

Runbook (from the repository root, with the ``.venv`` the README's first command made)::

    .venv/bin/python -m examples.basic & SERVER=$!  # serving assistant on http://127.0.0.1:8491
    #   --port, --host, --store sqlite:///./examples-data/basic (the default), --station-seconds
    #   (each of the tool's three stations takes that long, 1 s by default)

    # 1. Admit a message: 202 at once, with the submission's Location. Poll it until it settles.
    curl -si -XPOST localhost:8491/agents/assistant/me -H 'content-type: application/json' \\
         -d '{"body": "what is the weather in Paris?"}'
    #   HTTP/1.1 202 Accepted ... location: /submissions/<id>
    curl -s localhost:8491/submissions/<id>     # "status": "running", then "settled" with
    #   "settlement": {"status": "succeeded", "result": "The weather in Paris: ..."}

    # 2. Or wait for the answer in the same request.
    curl -s -XPOST 'localhost:8491/agents/assistant/me?wait=true' \\
         -H 'content-type: application/json' -d '{"body": "what is the weather in Oslo?"}'

    # 3. Watch the session live, from a second terminal, then send a message from the first:
    curl -N 'localhost:8491/agents/assistant/me?follow=true'
    curl -s -XPOST localhost:8491/agents/assistant/me -H 'content-type: application/json' \
         -d '{"body": "what is the weather in Rome?"}'
    #   the records, each an event of its kind: ... event: tool_called, then the tool's
    #   event: progress  data: {"type":"tool_progress",...,"text":"station 1 of 3 in Rome: 12 C"}
    #   ... event: tool_outcome ... event: assistant_message_completed ... submission_settled
    curl -s 'localhost:8491/agents/assistant/me?view=stream'   # the same as stream events
    #   (event: full for the tool_request and tool_response, start/delta/done for the text)

    # 4. Durability: start a slow call, kill -9 the server in the middle of the tool, restart.
    curl -s -XPOST localhost:8491/agents/assistant/me -H 'content-type: application/json' \\
         -d '{"body": "what is the weather in Lima?"}'
    sleep 1.5; kill -9 $SERVER                  # after "tool: reading station 2 of 3 in Lima"
    .venv/bin/python -m examples.basic & SERVER=$!  # the same store
    curl -s 'localhost:8491/submissions/<id>?wait=true'   # settled, "attempts": two of them
    #   stdout: "observer: recovery ... decision='resume'", "tool: reading station 3 of 3 in Lima"
    kill $SERVER                                # SIGTERM (or Ctrl-C): a graceful stop

After the restart the run is taken over at once (the dead server's liveness lock is free),
and the log decides what runs again. The model call that asked for the tool is not asked
again: its answer is in the log. ``weather`` is declared idempotent, so a call that has a
recorded intent but no outcome runs again under the same idempotency key. Each station it
reads is a durable step (``ctx.step``), so the stations it read before the kill are served
from the log: stdout shows ``tool: reading station 1`` once, before the kill, never after it
(its progress line comes again, from the journaled reading). The only model call of the
restarted server is the answer (one ``interceptor: turn`` line). A tool not declared
idempotent would not run again: it would get an ``unknown`` outcome, which the model reads.
Either way the submission settles once: ``curl -s localhost:8491/agents/assistant/me/records``
shows one ``submission_settled`` for it.

Stdout has one line for each engine event the observer sees (not the text deltas), and one
for each boundary the interceptor wraps (an attempt, a model turn, a tool call), with how
long it took. With a real model::

    TETHER_MODEL=openai:gpt-4.1-mini OPENAI_API_KEY=... .venv/bin/python -m examples.basic
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import re
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from examples._serving import serve
from tether.agent import Tool, ToolContext, agent_spec, tool
from tether.engine import AgentDefinition, DeltaReceived, EngineEvent, Operation, Runtime
from tether.http import create_app
from tether.messages import ModelRequest, ToolResultPart
from tether.models import (
    ModelConfigError,
    Rule,
    ScriptedModel,
    ToolUse,
    check_model_env,
    model_from_env,
)

__all__ = ("agents", "main", "observe", "time_boundaries", "weather_tool")

PORT = 8491
STATIONS = 3
SYSTEM_PROMPT = (
    "You are a weather assistant. For any question about the weather somewhere, call the "
    "`weather` tool with the city, then answer in one sentence with what it reported."
)


def say(line: str) -> None:
    """One line on stdout, flushed at once: a ``kill -9`` loses nothing printed."""
    print(line, flush=True)


def weather_tool(station_seconds: float) -> Tool:
    """The one tool: it reads three stations, ``station_seconds`` each."""

    @tool(idempotent=True)
    async def weather(city: str, ctx: ToolContext) -> str:
        """Today's weather in a city, from three stations. Slow: each takes a while."""
        readings: list[str] = []
        for station in range(1, STATIONS + 1):

            async def read(station: int = station) -> str:
                say(f"tool: reading station {station} of {STATIONS} in {city}")
                await asyncio.sleep(station_seconds)
                return f"{5 + zlib.crc32(f'{city}/{station}'.encode()) % 20} C"

            reading = str(await ctx.step(f"station {station}", read))  # journaled: read once
            await ctx.progress(f"station {station} of {STATIONS} in {city}: {reading}")
            readings.append(reading)
        return f"{city}: " + ", ".join(readings)

    return weather


_CITY = re.compile(r"weather\s+(?:in|at|for)\s+([A-Za-z][A-Za-z .'-]*)", re.IGNORECASE)


def _ask_weather(request: ModelRequest) -> ToolUse:
    found = _CITY.search(request.messages[-1].text)
    city = found.group(1).strip().rstrip("?.!") if found else "Paris"
    return ToolUse("weather", {"city": city.title()})


def _report(request: ModelRequest) -> str:
    results = [p for p in request.messages[-1].parts if isinstance(p, ToolResultPart)]
    return "The weather in " + "; ".join(part.content for part in results) + "."


KEYLESS = ScriptedModel(
    [Rule(_CITY, _ask_weather), Rule("", _report, on="tool")],
    chunk=4,
    default="Ask me about the weather, e.g. 'what is the weather in Paris?'",
    record=False,  # a server's model keeps no requests
)
"""Deterministic and offline: a weather question calls the tool, whose result is the answer."""


def agents(station_seconds: float = 1.0) -> dict[str, AgentDefinition]:
    """``assistant``: the keyless model (or ``TETHER_MODEL``'s) with the weather tool."""
    weather = weather_tool(station_seconds)
    chosen = model_from_env(KEYLESS, default_name="scripted")
    spec = agent_spec(
        chosen.model, model_name=chosen.name, system_prompt=SYSTEM_PROMPT, tools=[weather]
    )
    return {"assistant": AgentDefinition(lambda instance, env: spec)}


def observe(event: EngineEvent) -> None:
    """An observer: one line per engine event (but text deltas, one per streamed chunk)."""
    if isinstance(event, DeltaReceived):
        return
    details = " ".join(
        f"{field.name}={value!r}"
        for field in dataclasses.fields(event)
        if field.name != "correlation"
        and (value := getattr(event, field.name)) not in ("", None, (), {}, 0)
    )
    say(f"observer: {event.kind} {event.correlation.session_key} {details}".rstrip())


async def time_boundaries(operation: Operation, call_next: Callable[[], Awaitable[Any]]) -> Any:
    """An interceptor: it wraps each attempt, model turn and tool call, and logs how it went."""
    started, outcome = time.monotonic(), "ok"
    try:
        return await call_next()
    except BaseException as exc:
        outcome = f"raised {type(exc).__name__}"
        raise
    finally:
        took = time.monotonic() - started
        call = f" ({operation.call_id})" if operation.call_id else ""
        say(f"interceptor: {operation.boundary} {operation.name}{call} {outcome} in {took:.2f}s")


def main(argv: list[str] | None = None) -> None:
    """Serve the agent until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog=".venv/bin/python -m examples.basic",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--store", default="sqlite:///./examples-data/basic")
    parser.add_argument("--station-seconds", type=float, default=1.0, help="default 1")
    args = parser.parse_args(argv)
    try:
        check_model_env()  # a bad TETHER_MODEL or a missing key fails now, not at a first call
    except ModelConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    runtime = Runtime(
        agents(args.station_seconds),
        args.store,
        observers=[observe],
        interceptors=[time_boundaries],
    )
    banner = f"serving assistant on http://{args.host}:{args.port} (store {args.store})"
    serve(create_app(runtime, manage_runtime=True), args.host, args.port, banner)
