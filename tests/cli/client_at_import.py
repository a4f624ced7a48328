"""An app that builds its provider's client at import, as many do: ``AsyncOpenAI()`` refuses
to be built with no ``OPENAI_API_KEY``. Its agents are the recorded forecaster's."""

from __future__ import annotations

from openai import AsyncOpenAI

from tether.engine import AgentDefinition

from ..testing.replayed import agents as forecaster_agents

client = AsyncOpenAI()  # raises openai.OpenAIError when no key is set


def agents() -> dict[str, AgentDefinition]:
    return forecaster_agents()
