"""The built-in agent: a durable tool-using loop, and ``@tool`` functions for it.

Example::

    from tether.agent import ToolContext, agent_spec, tool
    from tether.engine import AgentDefinition

    @tool(idempotent=True)
    async def weather(city: str) -> str:
        '''Today's weather in a city.'''
        return "sunny"

    definition = AgentDefinition(lambda instance, env: agent_spec(model, tools=[weather]))
"""

from tether.agent._agent import Agent, AgentLoopError, agent_spec, render_signal
from tether.agent._memory import AgentMemory
from tether.agent._toolbox import Toolbox
from tether.agent._tools import Tool, ToolArgumentsError, ToolContext, tool
from tether.agent._toolset import Toolset
from tether.journal import ToolPolicy

__all__ = (
    "Agent",
    "AgentLoopError",
    "AgentMemory",
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolPolicy",
    "Toolbox",
    "Toolset",
    "agent_spec",
    "render_signal",
    "tool",
)
