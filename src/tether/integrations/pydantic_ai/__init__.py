"""pydantic-ai in Tether (the ``pydantic-ai`` extra): a tap to the canonical stream, and a
durable adapter that journals the agent's model and tool calls, however the run is driven.

Example::

    async for event in UnifiedEmitter().yield_turn(PydanticAITurn(agent.run_stream_events("hi"))):
        ...                             # the canonical stream of any pydantic-ai run

    from pydantic_ai import Agent
    from tether.integrations.pydantic_ai import durable

    support = Agent("openai:gpt-4o", instructions="Be brief.")

    def agents():                       # tether serve --app myapp:agents
        return {"support": durable(support)}
"""

from tether.integrations.pydantic_ai._adapter import Drive, PydanticAIHarness, ToolFailed, durable
from tether.integrations.pydantic_ai._agent import JournaledAgent, journaled_agent
from tether.integrations.pydantic_ai._mcp import McpPolicy
from tether.integrations.pydantic_ai._model import (
    JournaledModel,
    NotJournaled,
    UnsupportedConstruct,
)
from tether.integrations.pydantic_ai._tap import PydanticAITurn, pydantic_ai_events, usage_of

__all__ = (
    "Drive",
    "JournaledAgent",
    "JournaledModel",
    "McpPolicy",
    "NotJournaled",
    "PydanticAIHarness",
    "PydanticAITurn",
    "ToolFailed",
    "UnsupportedConstruct",
    "durable",
    "journaled_agent",
    "pydantic_ai_events",
    "usage_of",
)
