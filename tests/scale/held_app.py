"""The app of the API-and-workers-apart test (``tests.scale.held_app:agents``).

One agent, ``held``: a scripted model asks for the ``hold`` tool, which blocks until the test
releases it, then answers ``done``. The tool waits on a named pipe (its
path in ``TETHER_HELD_RELEASE``): opening it for reading blocks until the test opens it for
writing, so a run is held mid-tool, deterministically, for as long as the test wants, with no
timing in it. Every model invocation and tool run is audited (``tests.scale.chaos_app.audit``,
into ``TETHER_CHAOS_LOG``) with the pid of the process that made it, so the test can tell
which worker runs the submission and count the effects across processes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from tether.agent import agent_spec, tool
from tether.engine import AgentDefinition, AgentSpec
from tether.messages import ModelRequest, ModelResponse
from tether.models import DeltaSink, Rule, ScriptedModel, ToolUse

from .chaos_app import audit

__all__ = ("AGENT", "RELEASE_ENV", "agents")

AGENT = "held"
RELEASE_ENV = "TETHER_HELD_RELEASE"


class AuditedModel:
    """The scripted model, each invocation audited with its input hash."""

    def __init__(self) -> None:
        self.script = ScriptedModel(
            [
                Rule("", ToolUse("hold", call_id="hold-1")),
                Rule("", "done", on="tool"),
            ],
            record=False,
        )

    async def request(
        self, request: ModelRequest, stream: DeltaSink | None = None
    ) -> ModelResponse:
        audit("model", hash=request.input_hash())
        return await self.script.request(request, stream)


def _wait_for_release() -> str:
    with open(os.environ[RELEASE_ENV], "rb") as pipe:  # blocks until the test opens it
        return pipe.read().decode()


@tool(idempotent=True)
async def hold() -> str:
    """Blocks until the test releases it, then returns what the test wrote."""
    audit("tool_start")
    released = await asyncio.to_thread(_wait_for_release)
    audit("tool_end")
    return released


def agents() -> Mapping[str, AgentDefinition]:
    """The factory ``--app tests.scale.held_app:agents`` names."""

    def initialize(instance: str, env: Mapping[str, str]) -> AgentSpec:
        return agent_spec(AuditedModel(), model_name="held", tools=[hold])

    return {AGENT: AgentDefinition(initialize)}
