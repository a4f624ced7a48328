"""Agents for the engine tests, built on the journal test harnesses."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import JsonValue

from tether.engine import AgentDefinition, AgentSpec
from tether.journal import ToolScope, Turn
from tether.messages import ModelRequest, ToolCall
from tether.models import ScriptedModel
from tether.testing import RecordingTools

from ..journal.harnesses import EchoHarness, LoopHarness, planner


def agent(
    harness: Any = None,
    model: Any = None,
    tools: Any = None,
    **policy: Any,
) -> AgentDefinition:
    spec = AgentSpec(harness=harness or EchoHarness(), model=model, tools=tools)
    return AgentDefinition(lambda instance, env: spec, **policy)


def echo_agent(model: ScriptedModel | None = None, **policy: Any) -> AgentDefinition:
    return agent(
        EchoHarness(), model or ScriptedModel(lambda r: "echo: " + r.messages[-1].text), **policy
    )


def loop_agent(tools: RecordingTools | None = None, **policy: Any) -> AgentDefinition:
    return agent(LoopHarness(), ScriptedModel(planner), tools or RecordingTools(), **policy)


def slow_tools(
    delay: float, started: asyncio.Event | None = None, release: asyncio.Event | None = None
) -> RecordingTools:
    """Tools that take ``delay`` seconds, or until ``release`` is set if sooner (a test that
    needs a tool still running while it checks something holds it with ``release``)."""

    async def slow(call: ToolCall, scope: ToolScope) -> JsonValue:
        if started is not None:
            started.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for((release or asyncio.Event()).wait(), delay)
        return "slow done"

    return RecordingTools({"lookup": slow, "charge": slow})


class Steerable:
    """Waits (in a tool) for a steer to arrive, then answers with what it got."""

    name, version = "steerable", "1"

    def __init__(self, arrived: asyncio.Event) -> None:
        self.arrived = arrived

    async def run(self, turn: Turn) -> JsonValue:
        await turn.step("wait", self._wait)
        steers = await turn.steering()
        request = ModelRequest(model="test", messages=(*turn.inputs, *steers))
        return (await turn.model(request)).message.text

    async def _wait(self) -> JsonValue:
        await asyncio.wait_for(self.arrived.wait(), 60)
        return "waited"


Factory = Callable[[str, Mapping[str, str]], AgentSpec]
