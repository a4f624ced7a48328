"""The demo agents: ``assistant``, an echo model with three tools that show durability off,
and ``researcher``, which it delegates to (a durable subagent) when asked."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime

from tether.agent import Tool, ToolContext, agent_spec, tool
from tether.demo._model import DemoModel
from tether.engine import AgentDefinition, AgentSpec

__all__ = ("assistant", "demo_agents", "demo_subagents", "demo_tools", "researcher")

logger = logging.getLogger("tether.demo")
SYSTEM_PROMPT = (
    "You are the Tether demo assistant. You can tell the time, research, send email, "
    "and ask the researcher."
)
RESEARCHER_PROMPT = "You are the Tether demo researcher. Research the topic you are given."
RESEARCHER_DESCRIPTION = (
    "Researches a topic with a slow research tool that reports its progress, and answers "
    "with its findings."
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
        DemoModel(chunk=4), model_name="echo", system_prompt=SYSTEM_PROMPT, tools=demo_tools()
    )


def researcher(instance: str, env: Mapping[str, str]) -> AgentSpec:
    """The demo subagent's initializer: the same model, with the ``research`` tool only."""
    return agent_spec(
        DemoModel(chunk=4), model_name="echo", system_prompt=RESEARCHER_PROMPT, tools=[research]
    )


def demo_agents() -> dict[str, AgentDefinition]:
    """``assistant``, and ``researcher``, the subagent it delegates to (with
    :func:`demo_subagents` as the runtime's ``subagents`` policy)."""
    return {
        "assistant": AgentDefinition(assistant),
        "researcher": AgentDefinition(researcher, description=RESEARCHER_DESCRIPTION),
    }


def demo_subagents() -> dict[str, list[str]]:
    """The demo's delegation policy: ``assistant`` may hand tasks to ``researcher``.

    Example::

        Runtime(demo_agents(), store, subagents=demo_subagents())
    """
    return {"assistant": ["researcher"]}
