"""The demo assistant: an echo model and three tools that show durability off."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime

from tether.agent import Tool, ToolContext, agent_spec, tool
from tether.engine import AgentDefinition, AgentSpec
from tether.models import EchoModel

__all__ = ("assistant", "demo_agents", "demo_tools")

logger = logging.getLogger("tether.demo")
SYSTEM_PROMPT = (
    "You are the Tether demo assistant. You can tell the time, research, and send email."
)


@tool
async def clock() -> str:
    """The current date and time (UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@tool(idempotent=True)
async def research(topic: str, ctx: ToolContext) -> str:
    """Research a topic; slow on purpose (``TETHER_DEMO_RESEARCH_SECONDS``, default 3)."""
    seconds = float(os.environ.get("TETHER_DEMO_RESEARCH_SECONDS", "3"))
    steps = 3
    for step in range(1, steps + 1):
        await ctx.progress(f"researching {topic}: step {step} of {steps}")
        await asyncio.sleep(seconds / steps)
    return f"three findings about {topic}: it matters, it is well documented, and it keeps changing"


@tool(requires_approval=True)
async def send_email(to: str, text: str) -> str:
    """Send an email (a dry run: it is only logged). Needs a human's approval."""
    logger.warning("dry-run email to %s: %s", to, text)
    return f"dry-run email to {to}: {text}"


def demo_tools() -> list[Tool]:
    return [clock, research, send_email]


def assistant(instance: str, env: Mapping[str, str]) -> AgentSpec:
    """The demo agent's initializer (per instance, as any agent's)."""
    return agent_spec(
        EchoModel(chunk=4), model_name="echo", system_prompt=SYSTEM_PROMPT, tools=demo_tools()
    )


def demo_agents() -> dict[str, AgentDefinition]:
    return {"assistant": AgentDefinition(assistant)}
