"""pydantic-ai in Tether (the ``pydantic-ai`` extra): a tap to the canonical stream, and a
durable adapter that journals the agent's model and tool calls.

Example::

    from pydantic_ai import Agent
    from tether.integrations.pydantic_ai import durable

    support = Agent("openai:gpt-4o", instructions="Be brief.")

    def agents():                       # tether serve --app myapp:agents
        return {"support": durable(support)}
"""

from tether.integrations.pydantic_ai._adapter import PydanticAIHarness, ToolFailed, durable

__all__ = ("PydanticAIHarness", "ToolFailed", "durable")
