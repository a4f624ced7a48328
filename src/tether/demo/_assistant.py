"""The demo agents: ``assistant``, an echo model with three tools that show durability off,
and ``researcher``, which it delegates to (a durable subagent) when asked.

With ``TETHER_MODEL`` set (``openai:gpt-4.1-mini``, any pydantic-ai model name) both use that
model instead, with system prompts that tell a real model what the tools are for; without
it they stay keyless and deterministic (:class:`~tether.demo._model.DemoModel`)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime

from tether.agent import Tool, ToolContext, agent_spec, tool
from tether.demo._model import DemoModel
from tether.engine import AgentDefinition, AgentSpec
from tether.models import ModelChoice, model_from_env

__all__ = ("assistant", "demo_agents", "demo_subagents", "demo_tools", "researcher")

logger = logging.getLogger("tether.demo")
SYSTEM_PROMPT = (
    "You are the Tether demo assistant. You can tell the time, research, send email, "
    "and ask the researcher."
)
RESEARCHER_PROMPT = "You are the Tether demo researcher. Research the topic you are given."
# A real model (TETHER_MODEL) is told what the keyless model does by rule. The keyless model
# keeps the prompts above: they are part of every recorded call's input hash.
REAL_SYSTEM_PROMPT = (
    "You are the Tether demo assistant, in a demo of durable agent sessions. Be brief. "
    "Use your tools rather than guessing: `clock` for the current date or time; `research` "
    "to look a topic up (it is slow and reports its progress); `send_email` to send an email "
    "(a dry run that waits for a human's approval first: say so, and never claim it was sent "
    "unless the tool says it was). When the user asks you to ask the researcher, call `task` "
    "with agent `researcher` and a self-contained prompt, one call per topic, and report what "
    "it found. If a tool fails or is denied, say so plainly."
)
REAL_RESEARCHER_PROMPT = (
    "You are the Tether demo researcher. Call the `research` tool once on the topic you are "
    "given, then answer with its findings in two or three sentences."
)
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


def demo_model() -> ModelChoice:
    """The demo's model: ``TETHER_MODEL``'s if it is set, else the keyless
    :class:`~tether.demo._model.DemoModel` (journaled as ``echo``). The provider's client is
    built at the first request, so a replay needs no key."""
    return model_from_env(DemoModel(chunk=4), default_name="echo")


def assistant(instance: str, env: Mapping[str, str]) -> AgentSpec:
    """The demo agent's initializer (per instance, as any agent's)."""
    chosen = demo_model()
    prompt = REAL_SYSTEM_PROMPT if chosen.from_env else SYSTEM_PROMPT
    return agent_spec(
        chosen.model, model_name=chosen.name, system_prompt=prompt, tools=demo_tools()
    )


def researcher(instance: str, env: Mapping[str, str]) -> AgentSpec:
    """The demo subagent's initializer: the same model, with the ``research`` tool only."""
    chosen = demo_model()
    prompt = REAL_RESEARCHER_PROMPT if chosen.from_env else RESEARCHER_PROMPT
    return agent_spec(chosen.model, model_name=chosen.name, system_prompt=prompt, tools=[research])


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
